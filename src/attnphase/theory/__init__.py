"""The asymptotic (replica / state-evolution) solver of THEORY.md section 2.

Glossary (paper convention inside the solver, user units outside):
``q`` self overlap, ``m`` positional overlap, ``theta`` semantic overlap, ``V`` variance;
``q_hat, m_hat, theta_hat, V_hat`` their conjugates; ``alpha = n/d``.
"""
