"""Who used what: ML units, CPU-hours and accelerator-hours per day and per user, from the jobs'
own records, and the disk space each project holds; its page, CSV and REST."""
