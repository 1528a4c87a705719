"""``python -m attnphase.theory.native``: print or write the generated C proximal kernels
(:func:`attnphase.theory.native.codegen.main`)."""

from attnphase.theory.native.codegen import main

main()
