"""A batch's qualification round, on the crowd's side: one module per concern (docs/workers.md).

`attempts`: the hand-out's gate (who the round keeps from a batch's HITs), a worker's
standing, tries and answers with feedback. `pairs`: the round's pairs, drawn as golden pairs
are or chosen by an admin (CSV). `selectors`: reads for My work and the batch page.

Elsewhere: the pure rules in `mitl.qualification`, MTurk's QualificationType in
`annotation.mturk.qualification`, the pages in `frontend.views.qualification`, the study of
the round's effect in `pipeline.qualification_study`.

Nothing is re-exported here: import from the module that holds the name.
"""
