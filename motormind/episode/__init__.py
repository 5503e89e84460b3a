"""The episode: its settings, its book and its state machine (pure: no robot, simulator or attachment;
motormind/session/ opens and runs an episode).

    config.py    EpisodeConfig: the budgets and ablation switches of an episode (strict; one default each)
    book.py      EpisodeBook and EpisodeResult: budgets, counters and the typed outcome
    machine.py   EpisodeMachine: plan, report and verdict in, actions out; the one episode loop that
                 both transports drive (motormind/runner.py in-process, motormind/ros/role_nodes.py over ROS 2)

Import from the module that holds a name (``from motormind.episode.machine import EpisodeMachine``);
this package file imports nothing.
"""
