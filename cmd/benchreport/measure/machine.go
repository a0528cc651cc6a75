package measure

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Machine describes where the figures were measured.
type Machine struct {
	CPU        string // model name from /proc/cpuinfo
	Cores      int    // runtime.NumCPU
	GOMAXPROCS int
	OS         string
	Kernel     string
	GoVersion  string
	Commit     string // git HEAD, "+dirty" when the work tree differs
	Date       time.Time
	TmpFS      string // filesystem type of os.TempDir, where the audit log is written
}

// DescribeMachine gathers the machine's description. Whatever cannot be
// read is left as "unknown".
func DescribeMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), OS: runtime.GOOS + "/" + runtime.GOARCH,
		GoVersion: runtime.Version(), Date: time.Now(), CPU: "unknown", Kernel: "unknown", Commit: "unknown", TmpFS: "unknown"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		// GIT_OPTIONAL_LOCKS=0: status must not refresh (write) the index.
		st := exec.Command("git", "status", "--porcelain", "--untracked-files=no")
		st.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
		if out, err := st.Output(); err == nil && len(strings.TrimSpace(string(out))) > 0 {
			m.Commit += "+dirty"
		}
	}
	m.TmpFS = fsType(os.TempDir())
	return m
}

// fsType returns the type of the filesystem mounted deepest above path, from
// /proc/self/mounts.
func fsType(path string) string {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	best, typ := "", "unknown"
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 {
			continue
		}
		mnt := fs[1]
		if (path == mnt || strings.HasPrefix(path, strings.TrimSuffix(mnt, "/")+"/")) && len(mnt) >= len(best) {
			best, typ = mnt, fs[2]
		}
	}
	return typ
}

// Load is a snapshot of how busy the machine is, to tell how much of it the
// benchmark had.
type Load struct {
	At       time.Time
	LoadAvg  string        // /proc/loadavg's first three fields
	Busy     time.Duration // all CPUs' non-idle time since boot
	Self     time.Duration // this process's and its children's CPU time
	HaveBusy bool          // Busy could be read
}

// SnapshotLoad reads the machine's and this process's CPU time so far.
func SnapshotLoad() Load {
	l := Load{At: time.Now(), LoadAvg: "unknown"}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if fs := strings.Fields(string(b)); len(fs) >= 3 {
			l.LoadAvg = strings.Join(fs[:3], " ")
		}
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		fs := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
		if len(fs) > 8 && fs[0] == "cpu" {
			var busy int64
			for i, f := range fs[1:] {
				v, _ := strconv.ParseInt(f, 10, 64)
				if i != 3 && i != 4 && i < 8 { // skip idle, iowait; count up to steal
					busy += v
				}
			}
			l.Busy = time.Duration(busy) * 10 * time.Millisecond // USER_HZ is 100 on Linux
			l.HaveBusy = true
		}
	}
	// This process and its waited-for children (the ipc runs).
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			l.Self += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return l
}

// Others returns the CPU time that other processes used between two
// snapshots, in cores (1.0 = one core busy all the time), or -1 if unknown.
func Others(from, to Load) float64 {
	el := to.At.Sub(from.At)
	if !from.HaveBusy || !to.HaveBusy || el <= 0 {
		return -1
	}
	other := (to.Busy - from.Busy) - (to.Self - from.Self)
	return max(float64(other)/float64(el), 0)
}

// Self returns the CPU time this process used between two snapshots, in cores.
func Self(from, to Load) float64 {
	el := to.At.Sub(from.At)
	if el <= 0 {
		return 0
	}
	return float64(to.Self-from.Self) / float64(el)
}
