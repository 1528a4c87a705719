"""The proximal kernel written out on scalars for the attention geometries of the model (the
reference case ``L = 2``, rank 1, and the sizes of the variants): ``generate.py`` writes the
``k_<geometry>.py`` modules, :func:`attnphase.theory.channels.prox_batch` picks them."""
