// Run-time features of Go that bin/ipc, one goroutine that lives for a
// call, has no use for, turned off in the binary itself (go version -m
// bin/ipc shows them as DefaultGODEBUG; GODEBUG in the environment still
// wins):
//
//   - containermaxprocs: reading the cgroup's CPU limit at start to size
//     GOMAXPROCS;
//   - updatemaxprocs: a background goroutine that re-reads that limit;
//   - decoratemappings: naming each anonymous mapping for /proc/PID/maps
//     with prctl(PR_SET_VMA).
//
// Each costs the start system calls, wake-ups or first touches of memory
// that every call pays (docs/CONTAINERS.md#ipc-against-a-hello-world).

//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0
//go:debug decoratemappings=0

package main
