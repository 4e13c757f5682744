"""Taking and keeping a message, and how it ends: the loop takes a task, keeps it while it runs, asks one pure
function how the message ends (`outcomes.decide`) and carries that out (`settle.Settler.settle`).

The verbs, one each: take (receive), keep (extend the visibility, beat the token), give back (visible
again at once), resend (a new message, this delivery not counted), delete; beat, succeed, fail for
the task token. The endings are `outcomes.Ending`'s, listed in docs/layout.md.
"""
