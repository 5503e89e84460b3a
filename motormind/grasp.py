"""Held or not: the one definition of a grasp, the same words for every backend.

A backend reports facts about a gripper command: the finger gap before and after, and whether the
fingers stopped against something between them (``MotionResult.contact`` on a gripper motion: the
stall a real gripper's current or a simulator's finger contacts tell). It never says "held". The
Controller feeds every command's start and end gap to one ``GraspTracker``, which decides:

* a gripper command that narrows the gap and ends with the fingers stalled against something:
  **held**, at the gap where they stopped (whatever that width: a bowl's 6.9 mm wall is held);
* one that narrows the gap without a stall: **nothing held** (the fingers met nothing);
* one that widens the gap while something is held: **released**;
* any other command (a move, a rotation, a wait) while held, during which the gap closes more than
  ``SLIP_MM`` below where the fingers stalled, to ``EMPTY_MM`` or less: **the held object slipped
  out**, said on that command ("the gap closed from 11.4 to 1.7 mm during this move (it held at
  11.4 mm): the held object slipped out");
* one during which the gap closes that much but stays above ``EMPTY_MM``: **the grip shifted**, still
  held at the new gap ("the gap closed from 12.4 to 4.7 mm during this move (it held at 12.4 mm): the
  grip shifted (the object turned or slid between the fingers); something is still between them").
  The real-VLM trials saw this three times with the object still hanging in the fingers (a bowl's
  wall 19.5 -> 4.8 and 12.4 -> 4.7 mm, a mug's 13.7 -> 10.3 mm): a gap that narrows is not a loss.

The sentences are what a report's reason says (docs/commands.md, "Gripper reports").
"""
from __future__ import annotations

SLIP_MM = 2.5        # a held gap that closes more than this below where the fingers stalled: slipped out
                     # (a grip tightening on a rigid object closes it well under 1 mm; an object lost
                     # from a thin-walled grasp at 5.8 mm closes it to ~2 mm, 3.8 mm)
EMPTY_MM = 3.0       # a gap this small has nothing of substance between the fingers: a held object is
                     # gone (the true slip seen: 11.4 -> 1.7 mm; thin walls still held: 4.7 and 4.8 mm)
MOVED_MM = 0.5       # a gripper command whose gap changed less than this neither narrowed nor widened it


class GraspTracker:
    """Whether something is held, from the gap's history. ``held_mm``: the gap where the fingers
    stalled on the object now held (None: nothing held)."""

    def __init__(self, slip_mm: float = SLIP_MM):
        if not slip_mm > 0:
            raise ValueError(f"slip_mm: must be > 0, got {slip_mm!r}")
        self.slip_mm = float(slip_mm)
        self.held_mm: float | None = None
        self.last_mm: float | None = None      # the gap at the end of the last command seen

    @property
    def held(self) -> bool:
        return self.held_mm is not None

    def reset(self) -> None:
        self.held_mm = self.last_mm = None

    def start_batch(self, gap_mm: float) -> str:
        """Resynchronise at a batch's start with the gap measured now. A gap that opened since the last
        command without a gripper command of ours (a new episode's reset, an operator's hand): nothing
        held any more. One that closed past the slip threshold while held: the object slipped out
        between the batches (returned, for the batch's first command to say)."""
        gap = float(gap_mm)
        said = ""
        if self.held_mm is not None:
            if gap > self.held_mm + self.slip_mm:
                self.held_mm = None
            elif gap < self.held_mm - self.slip_mm:
                said = f"the gap closed from {self.held_mm:.1f} to {gap:.1f} mm between the batches: " + self._narrowed(gap)
        self.last_mm = gap
        return said

    def gripper(self, start_mm: float, end_mm: float, target_mm: float, stalled: bool, full: bool = False) -> str:
        """A gripper command aimed at ``target_mm`` ran from ``start_mm`` to ``end_mm``; ``stalled``: the
        fingers stopped against something between them; ``full``: a full open or close (no target width
        to state). Returns the sentence its report says."""
        start, end, target = float(start_mm), float(end_mm), float(target_mm)
        was = self.held_mm
        self.last_mm = end
        width = f"width {end:.1f} mm" + ("" if full else f" (target {target:.1f} mm)")
        if target < start - MOVED_MM or (stalled and target <= start):      # closing
            if stalled:
                self.held_mm = end
                return (f"stalled: holding at {end:.1f} mm (the fingers stopped against something between them: "
                        f"an object is held)" + ("" if full else f"; target {target:.1f} mm"))
            self.held_mm = None
            return ((f"closed to {end:.1f} mm" if full else width) + " without meeting anything: nothing held"
                    + (f" (the object held at {was:.1f} mm is no longer between the fingers)" if was is not None else ""))
        if target > start + MOVED_MM and end > start + MOVED_MM:           # opened
            self.held_mm = None
            return ((f"opened to {end:.1f} mm" if full else width) + ": "
                    + (f"the object held at {was:.1f} mm is released" if was is not None else "nothing held"))
        if full:
            width = f"{'open' if target >= start else 'closed'} at {end:.1f} mm"
        return width + (f": still holding at {was:.1f} mm" if was is not None else ": nothing held")

    def during(self, what: str, start_mm: float, end_mm: float) -> str:
        """A command that is not a gripper command (``what``: move, rotation, wait) ran from ``start_mm``
        to ``end_mm``. Returns "" or the sentence saying the held object slipped out during it."""
        start, end = float(start_mm), float(end_mm)
        self.last_mm = end
        if self.held_mm is None or end >= self.held_mm - self.slip_mm:
            return ""
        held = self.held_mm
        return (f"the gap closed from {start:.1f} to {end:.1f} mm during this {what} (it held at {held:.1f} mm): "
                + self._narrowed(end))

    def _narrowed(self, gap: float) -> str:
        """What a held gap that closed past the slip threshold to ``gap`` means, said once."""
        if gap <= EMPTY_MM:
            self.held_mm = None
            return "the held object slipped out"
        self.held_mm = gap
        return (f"the grip shifted (the object turned or slid between the fingers); something is still between "
                f"them at {gap:.1f} mm")
