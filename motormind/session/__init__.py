"""Opening an episode: the one place robot, brain, roles and attachments are put together.

    setup.py     EpisodeSetup: what an episode is (robot config, profile, brain, EpisodeConfig with its
                 budgets, attachments), frozen, built once from the command line, a job or a file
    tasks.py     what the episode is asked and how it is judged: a LIBERO-PRO task, or the fake's tasks
    attach.py    the attachments: MCAP, the outside hand of interference, the rollout video
    interference.py  the outside hand itself (Interferer) and what it cost (InterferenceProbe)
    open.py      open_episode(setup): build, run, record and close one episode; its summary
    checks.py    before anything is built: the grid of tasks exists on its backend (check_grid)

Used by ``motormind run`` (evaluate/run.py), ``motormind eval`` (LIBERO-PRO and the fake),
``motormind trials`` (evaluate/trials.py), the console (console/session.py) and the ROS 2 nodes
(their setup from the stack file). Above the core (episode/, runner.py, components.py): nothing
there imports this package; it imports nothing of the console or the evaluation. This package
file imports nothing.
"""
