package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on Linux).
const clockTicks = 100

// cpuTimes are CPU times used so far: by this process (the worker and the
// clients run in it) and by the dev server's process.
type cpuTimes struct {
	self, server time.Duration
	// ok reports that both were read.
	ok bool
}

// readCPU returns the CPU time (user and system) used so far by this
// process and by the process serverPID.
func readCPU(serverPID int) cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}
	}
	self := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	server, err := processCPU(serverPID)
	if err != nil {
		return cpuTimes{}
	}
	return cpuTimes{self: self, server: server, ok: true}
}

// since returns the CPU times used from c0 to c.
func (c cpuTimes) since(c0 cpuTimes) cpuTimes {
	if !c.ok || !c0.ok {
		return cpuTimes{}
	}
	return cpuTimes{self: c.self - c0.self, server: c.server - c0.server, ok: true}
}

// processCPU returns the CPU time (utime + stime) the process pid used so
// far, in clock ticks' resolution.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may hold spaces, so the fields are counted after its closing one.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, f[11].
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
