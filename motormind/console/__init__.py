"""The operator console: a web page to watch MotorMind work, approve or edit what it proposes, jog
the arm through the Controller's validation, and stop it (docs/console.md).

    desk.py       the operator's hold on an episode: approval, takeover, pause, one operator in control
    view.py       what the page shows, folded from the episode's record events
    runtime.py    the actions (one method each) and their checks, shared by both transports
    inprocess.py  attached in-process (``motormind run --console``, ``motormind console --robot``)
    brain.py      taking over a role: the operator answers through the role's parse path
    server.py     the HTTP server (page, state stream, frames, token-checked actions)
    cli.py        ``motormind console``
The ROS 2 node is motormind/ros/console_node.py (it reuses all of the above).
"""
