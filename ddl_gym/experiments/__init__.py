"""Experiment grids: one policy on one scenario (``cells``), the policy x
workload x congestion x seed comparison grid (``grid``), and a Ray backend
that runs the same pure cells as tasks (``ray_backend``).

    from ddl_gym.experiments import grid
    cells = grid.make_cells(["fifo", "dally"], ["default"], ["heavy"], [0], None, 60)
    rows = grid.run_grid(cells, jobs=1)
"""
