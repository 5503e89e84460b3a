"""The VLM skill diagnostic: which manipulation skills a VLM lacks, before it drives an arm.

Four skills, asked about frames of oracle rollouts on LIBERO tasks (one question per moment):

    action       which next command makes progress on the current subgoal (4 options)
    progress     how far along the current subgoal is (4 stage descriptions)
    completion   is a subgoal, or the whole task, achieved now (yes / no)
    grounding    point at a named object in one camera's image and say how far it is from the grip
                 point in base-frame mm; scored continuously (px and mm errors, grounding.py)

``motormind diagnose build`` makes a question set (``build.py``: rollouts -> moments with measured
and privileged state -> questions; ground truth from privileged state, ``truth.py``);
``motormind diagnose run --brain ...`` asks a brain through the same Role machinery the stack's
roles use and scores it per skill and per suite (``score.py``). The set format is in
``dataset.py`` and docs/diagnostic.md.

``motormind vlm check`` (``endpoint_check.py``) asks an endpoint the real roles' requests and says
whether it is fit to drive a robot (docs/vlm-servers.md).

Light to import: nothing here imports the simulator at module level.
"""

FORMAT = "motormind-diagnose-set"
FORMAT_VERSION = 2                 # the on-disk layout of a question set (dataset.py); 2: grounding questions,
                                   #  each question's camera calibrations
GENERATOR_VERSION = "2.0.0"        # the question generator: bump when the same seed gives other questions
SKILLS = ("action", "progress", "completion", "grounding")
CHOICE_SKILLS = ("action", "progress", "completion")   # multiple choice: lettered options, one correct
