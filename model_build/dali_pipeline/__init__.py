"""A DALI pipeline file: serialized and run in the image's DALI release (a side environment), moved to the CPU,
compared with the PIL/numpy reference in pixel levels; shared by the dali backend and the ensemble's check of a
`task.preprocess: dali` step."""
