package rushbench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every architecture Linux and
// Go share. CPU times are therefore read to 10 ms, which a wave's seconds of CPU make small.
const clockTicks = 100

// cpuUse is CPU time used, by source; a negative value was not read.
type cpuUse struct {
	server  time.Duration // the design's child process
	redis   time.Duration // the whole Redis server (every master of a cluster)
	mariadb time.Duration // mariadbd, when it runs on this machine
	client  time.Duration // this process: the clients
}

// since is u − before, per source; a source either did not read stays unread.
func (u cpuUse) since(before cpuUse) cpuUse {
	sub := func(a, b time.Duration) time.Duration {
		if a < 0 || b < 0 {
			return -1
		}
		return a - b
	}
	return cpuUse{server: sub(u.server, before.server), redis: sub(u.redis, before.redis),
		mariadb: sub(u.mariadb, before.mariadb), client: sub(u.client, before.client)}
}

// cpuMeter reads the CPU time the processes of a measurement have used so far.
type cpuMeter struct {
	env     *Env
	server  int // pid of the design's child
	mariadb int // pid of mariadbd; 0 when it cannot be read (note says why)
	note    string
}

func newCPUMeter(ctx context.Context, env *Env, db *database, serverPID int) *cpuMeter {
	m := &cpuMeter{env: env, server: serverPID}
	m.mariadb, m.note = mariadbPID(ctx, env.MySQLDSN, db.admin)
	return m
}

func (m *cpuMeter) read(ctx context.Context) cpuUse {
	u := cpuUse{server: procCPU(strconv.Itoa(m.server)), client: procCPU("self"), mariadb: -1}
	if m.mariadb > 0 {
		u.mariadb = procCPU(strconv.Itoa(m.mariadb))
	}
	var err error
	if u.redis, err = m.env.redisCPU(ctx); err != nil {
		u.redis = -1
	}
	return u
}

// procCPU is utime + stime of /proc/<pid>/stat (pid may be "self"); -1 when it cannot be read.
func procCPU(pid string) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return -1
	}
	return statCPU(string(b))
}

// statCPU reads utime + stime from a /proc/<pid>/stat line; -1 when it is not one. The command name
// (field 2) is in parentheses and may hold spaces and parentheses, so fields count from the last
// ')': the state is field 3, utime field 14 and stime field 15.
func statCPU(stat string) time.Duration {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// redisCPU is INFO cpu's used_cpu_sys + used_cpu_user, summed over the masters: the whole server's
// CPU since it started, whoever asked for it.
func (e *Env) redisCPU(ctx context.Context) (time.Duration, error) {
	masters, err := e.masters(ctx)
	if err != nil {
		return 0, err
	}
	var total float64
	for _, c := range masters {
		info, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return 0, err
		}
		found := 0
		for _, line := range strings.Split(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if k != "used_cpu_sys" && k != "used_cpu_user" {
				continue
			}
			secs, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
			}
			total += secs
			found++
		}
		if found != 2 {
			return 0, errors.New("INFO cpu has no used_cpu_sys and used_cpu_user")
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// mariadbPID finds the MySQL server's process on this machine: from its pid file, or as the one
// mariadbd (or mysqld) process there is. It answers 0 and why when it cannot, and otherwise what it
// read, for the report.
func mariadbPID(ctx context.Context, dsn string, admin *sql.DB) (int, string) {
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return 0, "MariaDB: not read (" + err.Error() + ")"
	}
	if cfg.Net != "unix" {
		host, _, _ := net.SplitHostPort(cfg.Addr)
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return 0, fmt.Sprintf("MariaDB: not read — the server at %s is not on this machine", cfg.Addr)
		}
	}
	var pidFile string
	if admin.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&pidFile) == nil {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && isMySQLServer(pid) && procCPU(strconv.Itoa(pid)) >= 0 {
				return pid, fmt.Sprintf("MariaDB: /proc/%d/stat utime+stime of the server process (pid from %s)", pid, pidFile)
			}
		}
	}
	// The pid file may be elsewhere (a container's) or unreadable: the one server process will do.
	var pids []int
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, c := range comms {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(c)))
		if err == nil && isMySQLServer(pid) {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 1 && procCPU(strconv.Itoa(pids[0])) >= 0 {
		return pids[0], fmt.Sprintf("MariaDB: /proc/%d/stat utime+stime of the one mariadbd process on this machine", pids[0])
	}
	return 0, fmt.Sprintf("MariaDB: not read — pid file %q unreadable here and %d mariadbd/mysqld processes visible (a container?)", pidFile, len(pids))
}

func isMySQLServer(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	name := strings.TrimSpace(string(b))
	return err == nil && (name == "mariadbd" || name == "mysqld")
}
