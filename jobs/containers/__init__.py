"""Custom containers: jobs whose ``masterConfig.imageUri`` names the user's own image.

``engine`` finds and configures the container engine (podman, or docker), ``images`` holds which
images a project may run and loads uploaded archives, ``replica`` runs one replica as a container
in its job's (or trial's) pod.
"""
