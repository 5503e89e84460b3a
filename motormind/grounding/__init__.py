"""Grounding: what ties a camera's pixels to the base frame (docs/grounding.md).

``camera``  CameraCalibration: intrinsics and pose of one camera, project / unproject, resize-aware.
``image_sizing``  how each model family resizes an image (its pixel grid; openai_brain sends that size)
``marks``   marks drawn on the images a VLM sees (the grip point, direction arrows, a scale bar,
            the fingers' closing line), and the options a VLM config gives them.

Pure core: numpy (and OpenCV for drawing, imported on first use); no simulator imports.
"""
