"""The console's job pages: the list, a job's page, the submit form and clone, sharing, the workers page."""
