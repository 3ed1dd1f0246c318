package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sessionflow/sessionflow/internal/app/readiness"
	"github.com/sessionflow/sessionflow/internal/app/toolbuild"
)

// The database account of the cluster, the compose stack's.
const (
	dbUser     = "temporal"
	dbPassword = "temporal"
)

// ErrNoPostgres is returned when no PostgreSQL server binaries are found and
// they may not be installed.
var ErrNoPostgres = errors.New("PostgreSQL server binaries not found")

// postgres is the cluster's PostgreSQL server.
type postgres struct {
	bin     string // directory of initdb, postgres, pg_isready
	data    string // data directory
	logPath string
	port    int
	cred    *syscall.Credential // nil: run as the launcher's user
	proc    *proc
}

// postgresBinDir finds the directory of PostgreSQL's server binaries: PG_BIN,
// else the newest /usr/lib/postgresql/<version>/bin of Debian's packages.
// With install set and none found, it installs Debian's postgresql package
// with apt-get first.
func postgresBinDir(ctx context.Context, getenv func(string) string, install bool, progress io.Writer) (string, error) {
	if v := getenv("PG_BIN"); v != "" {
		if !toolbuild.IsExecutable(filepath.Join(v, "initdb")) {
			return "", fmt.Errorf("PG_BIN=%s: %w: no initdb there", v, ErrNoPostgres)
		}
		return v, nil
	}
	if dir := debianPostgres(); dir != "" {
		return dir, nil
	}
	if !install {
		return "", fmt.Errorf("%w: install Debian's postgresql package or set PG_BIN", ErrNoPostgres)
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w: installing it needs root (apt-get install postgresql), or set PG_BIN", ErrNoPostgres)
	}
	fmt.Fprintln(progress, "installing PostgreSQL (apt-get install postgresql)…")
	if err := aptInstall(ctx, progress, "postgresql"); err != nil {
		return "", err
	}
	if dir := debianPostgres(); dir != "" {
		return dir, nil
	}
	return "", fmt.Errorf("%w after installing the postgresql package", ErrNoPostgres)
}

// debianPostgres returns the bin directory of the newest PostgreSQL under
// /usr/lib/postgresql, "" when there is none.
func debianPostgres() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	type v struct {
		dir string
		n   int
	}
	var found []v
	for _, d := range dirs {
		n, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err == nil && toolbuild.IsExecutable(filepath.Join(d, "initdb")) {
			found = append(found, v{d, n})
		}
	}
	if len(found) == 0 {
		return ""
	}
	sort.Slice(found, func(i, j int) bool { return found[i].n > found[j].n })
	return found[0].dir
}

// aptInstall installs packages with apt-get, updating the package lists
// once when the first attempt fails.
func aptInstall(ctx context.Context, progress io.Writer, pkgs ...string) error {
	install := func() error {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "-q", "--no-install-recommends"}, pkgs...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = progress, progress
		return cmd.Run()
	}
	if err := install(); err == nil {
		return nil
	}
	update := exec.CommandContext(ctx, "apt-get", "update", "-q")
	update.Stdout, update.Stderr = progress, progress
	if err := update.Run(); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	if err := install(); err != nil {
		return fmt.Errorf("apt-get install %s: %w", strings.Join(pkgs, " "), err)
	}
	return nil
}

// unprivileged returns the credentials PostgreSQL runs with: nil when the
// launcher is not root, else those of the postgres account (created by
// Debian's package) or, without it, nobody. PostgreSQL refuses to run as
// root.
func unprivileged() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
	}
	return nil, errors.New("running as root and neither a postgres nor a nobody account exists to run PostgreSQL as")
}

// initPostgres creates a database cluster in data, owned by cred's user,
// whose superuser is dbUser with dbPassword (password login over TCP).
func initPostgres(ctx context.Context, bin, data string, cred *syscall.Credential) error {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fmt.Errorf("postgres: data directory: %w", err)
	}
	pwfile := filepath.Join(data, "..", filepath.Base(data)+".pw")
	if err := os.WriteFile(pwfile, []byte(dbPassword+"\n"), 0o600); err != nil {
		return fmt.Errorf("postgres: password file: %w", err)
	}
	defer os.Remove(pwfile)
	if cred != nil {
		for _, p := range []string{data, pwfile} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return fmt.Errorf("postgres: handing %s to uid %d: %w", p, cred.Uid, err)
			}
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "-U", dbUser, "--pwfile", pwfile,
		"--auth-local", "trust", "--auth-host", "scram-sha-256",
		"-E", "UTF8", "--locale", "C", "--no-instructions")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = os.TempDir() // readable by the unprivileged user
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("postgres: initdb: %w\n%s", err, toolbuild.Tail(out.Bytes(), 4096))
	}
	return nil
}

// start starts the server on 127.0.0.1:port (its socket in the data
// directory) and waits until it accepts connections.
func (pg *postgres) start(ctx context.Context) error {
	cmd := exec.Command(filepath.Join(pg.bin, "postgres"),
		"-D", pg.data, "-p", strconv.Itoa(pg.port), "-h", "127.0.0.1", "-k", pg.data,
		// Four Temporal services with a persistence and a visibility pool
		// each, the setup tools and psql.
		"-c", "max_connections=300")
	cmd.Dir = os.TempDir()
	p, err := startProc("postgres", cmd, pg.logPath, pg.cred)
	if err != nil {
		return err
	}
	pg.proc = p
	err = readiness.Wait(ctx, readiness.Options{
		What: "PostgreSQL", Timeout: 2 * time.Minute, Interval: 200 * time.Millisecond,
		Exited: p.Exited(), ExitErr: p.Err, Log: p.log,
	}, func(ctx context.Context) error {
		out, err := exec.CommandContext(ctx, filepath.Join(pg.bin, "pg_isready"),
			"-h", "127.0.0.1", "-p", strconv.Itoa(pg.port), "-U", dbUser, "-d", "postgres", "-t", "5").CombinedOutput()
		if err != nil {
			return fmt.Errorf("pg_isready: %w: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	})
	if err != nil {
		p.kill()
		return err
	}
	return nil
}

// crash stops the server the way a crash does, without a checkpoint
// (immediate shutdown, SIGQUIT): the next start replays the WAL.
func (pg *postgres) crash() {
	if pg.proc != nil {
		_ = pg.proc.stop(syscall.SIGQUIT, 30*time.Second)
	}
}

// stop shuts the server down cleanly (fast shutdown, SIGINT).
func (pg *postgres) stop() error {
	if pg.proc == nil {
		return nil
	}
	err := pg.proc.stop(syscall.SIGINT, time.Minute)
	pg.proc = nil
	return err
}
