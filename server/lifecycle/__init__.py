"""The process: one configured gateway and its parts (`gateway`), serving it in one or several
processes (`serve`), reloading rules when files change (`watch`) and the retention loop."""
