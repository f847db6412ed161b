"""The plumbing floor, under `engine/` and `server/`: what every retry loop and every process
supervisor share. `backoff` is the one back-off policy (a pure function of the attempt and a
random draw); `children` is the one child-process helper (spawn, ready handshake, reap, forward
signals, restart with the back-off). It imports neither `engine` nor `server`: both import it."""
