"""Opening an episode: the one place robot, brain, roles and attachments are put together.

    setup.py     EpisodeSetup: what an episode is (robot config, profile, brain, EpisodeConfig with its
                 budgets, attachments), frozen, built once from the command line, a job or a file
    tasks.py     what the episode is asked and how it is judged: a LIBERO-PRO task, or the fake's tasks
    attach.py    the attachments: the operator console, MCAP, the outside hand of interference
    open.py      open_episode(setup): build, run, record and close one episode; its summary

Used by ``motormind run``, ``motormind eval`` (LIBERO-PRO and the fake), ``motormind trials`` and the
ROS 2 nodes' episode budgets. Above the core (episode/, runner.py, components.py): nothing there
imports this package. This package file imports nothing.
"""
