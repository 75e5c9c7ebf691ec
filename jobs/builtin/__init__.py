"""Built-in algorithm jobs on the console's side: packaging and checks, their pages, the data analysis page."""
