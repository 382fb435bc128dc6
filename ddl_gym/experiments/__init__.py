"""Experiment grids: one policy on one scenario (``cells``), the policy x
workload x congestion x seed comparison grid (``grid``), running a grid's
cells with a progress bar, one JSON per finished cell, Ctrl-C and resume
(``runner``), and a Ray backend that runs the same pure cells as tasks
(``ray_backend``). The command line over them is ``ddl-gym compare``.

    from ddl_gym.experiments import grid, runner
    cells = grid.make_cells(["fifo", "dally"], ["default"], ["heavy"], [0], None, 60)
    done, complete = runner.run_plan(runner.Plan(grid.run_cell, cells), processes=2)
    summary, jobs = runner.frames(done)
"""
