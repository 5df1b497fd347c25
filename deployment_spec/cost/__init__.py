"""What an endpoint sustains and costs: measured capacity (``capacity.json``), prices (``pricing`` and the
shipped snapshot under ``prices/``), the monthly floor, ceiling and expected range (``figures``) with the
weekly schedules they average (``weekly_schedule``), cost per million inferences (``measured_cost``) and how
the figures read (``report``). Imports ``sections`` and ``parsing``, never ``rules`` or the loader."""
