"""train's checkpoints and resume. wholeness: which checkpoint folders are whole (the marker written after all of a
checkpoint's files); callbacks: around each save (room before it, the marker after it, the upload queued); upload
and remote: a run's checkpoints on the tracking server (checkpoint_upload); output_folder: where checkpoints and
the model go, one train at a time; resume: which run and checkpoint a resume continues; resume_checks: what a
resume checks before it touches its run."""
