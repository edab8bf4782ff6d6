"""The closed-loop runtime every stage runs: env worker processes (:mod:`.worker`) driven by one episode loop
(:mod:`.pool`), the conditions it plays (:mod:`.conditions`), the mask sources between camera and controller
(:mod:`.masks`), and where the episodes run (:mod:`.backend`: local processes or Ray actors)."""
