"""Tables from stored records, and what is read off them: the runs table, hyperparameter
selection and curves (`curves`), paper claims tested with paired statistics (`claims`), and the
regression check against a stored reference (`check`). Pure functions of data frames: nothing
here trains, reads a spec file or draws."""
