"""Taking and keeping a message: the loop takes a task, keeps it while it runs, and ends with one
queue action (delete, give back or resend) and one token answer (succeed or fail).

The verbs, one each: take (receive), keep (extend the visibility, beat the token), give back (visible
again at once), resend (a new message, this delivery not counted), delete; beat, succeed, fail for
the task token.
"""
