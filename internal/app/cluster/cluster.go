// Package cluster runs sessionflow's production topology on one machine
// without containers: PostgreSQL from Debian's package (run as an
// unprivileged user in a temporary data directory), the schema and
// namespace setup of the compose stack's jobs (deploy's scripts), the
// Temporal server built from the tools/ module with deploy's configuration
// (several history shards, SQL visibility with sessionflow's search
// attributes), and N sessionflow worker processes sharing one store root.
//
// Start brings it up; the methods kill and restart its parts for the
// failover tests and the soak. The launcher command is cmd/cluster. The
// package is Linux only (parent-death signals, Debian's PostgreSQL).
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring (internal/app). It may import any package below the
// client's row, the client and the other program-wiring packages; only
// programs and tests import it.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/jsonl"
)

// HistoryShards is the number of history shards of deploy's server
// configuration (deploy/temporal/config); Start checks that the running
// server has them.
const HistoryShards = 4

// Defaults of Options.
const (
	DefaultWorkers   = 2
	DefaultTaskQueue = "sessionflow"
)

// Options configure Start. The zero value runs DefaultWorkers workers on
// DefaultTaskQueue in a new temporary directory.
type Options struct {
	// Dir holds everything of the cluster: logs, the server configuration,
	// the store root and (unless running as root) the database. Empty means
	// a new temporary directory, removed by Stop unless Keep is set.
	Dir string
	// Keep keeps a temporary Dir after Stop.
	Keep bool
	// Workers is the number of worker processes; default DefaultWorkers,
	// negative for none.
	Workers int
	// TaskQueue is the task queue of the workers; default DefaultTaskQueue.
	TaskQueue string
	// Root is the store root the workers share; default <Dir>/store.
	Root string
	// Compression is the workers' store encoding; default zstd, as in the
	// compose stack.
	Compression jsonl.Compression
	// WorkerArgs are more flags of every worker.
	WorkerArgs []string
	// WorkerBinary is a built worker; empty means `go build ./worker` of
	// the checkout.
	WorkerBinary string
	// WorkerLogLevel is the workers' --log-level; default "warn".
	WorkerLogLevel string
	// ServerLogLevel is the Temporal server's log level; default "warn".
	ServerLogLevel string
	// NoInstall fails instead of installing PostgreSQL with apt-get when it
	// is missing.
	NoInstall bool
	// Build configures the search and build of the server binaries.
	Build BuildOptions
	// Progress receives progress lines; nil discards them.
	Progress io.Writer
}

// Cluster is a running local cluster.
type Cluster struct {
	opts    Options
	dir     string
	tempDir bool
	pgDir   string // removed by Stop when not under dir
	root    string

	pg        *postgres
	srv       *temporalServer
	client    client.Client
	workerBin string

	mu      sync.Mutex
	gen     int
	workers []*Worker

	stopOnce sync.Once
	stopErr  error
}

func (c *Cluster) progressf(format string, args ...any) {
	fmt.Fprintf(c.opts.Progress, "cluster: "+format+"\n", args...)
}

// Start brings the cluster up: binaries (built and cached on first use),
// PostgreSQL, the schemas, the server, the namespace with its search
// attributes and the workers, each polling. On failure everything started
// is stopped again.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Workers == 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.TaskQueue == "" {
		opts.TaskQueue = DefaultTaskQueue
	}
	if opts.Compression == "" {
		opts.Compression = jsonl.CompressionZstd
	}
	if opts.WorkerLogLevel == "" {
		opts.WorkerLogLevel = "warn"
	}
	if opts.ServerLogLevel == "" {
		opts.ServerLogLevel = "warn"
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Build.Progress == nil {
		opts.Build.Progress = opts.Progress
	}
	c := &Cluster{opts: opts, dir: opts.Dir}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "sessionflow-cluster-"); err != nil {
			return nil, fmt.Errorf("cluster: temporary directory: %w", err)
		}
		c.tempDir = true
	}
	if c.dir, err = filepath.Abs(c.dir); err != nil {
		return nil, fmt.Errorf("cluster: directory: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("cluster: %w (logs in %s)", err, c.dir), c.Stop())
		}
	}()
	c.root = opts.Root
	if c.root == "" {
		c.root = filepath.Join(c.dir, "store")
	}
	for _, d := range []string{c.dir, c.root, filepath.Join(c.dir, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return c, err
		}
	}
	started := time.Now()

	// The worker builds while the database starts.
	workerDone := make(chan error, 1)
	c.workerBin = opts.WorkerBinary
	if c.workerBin == "" {
		c.workerBin = filepath.Join(c.dir, "bin", "worker")
		go func() {
			mod, err := ModuleDir(opts.Build.WorkDir)
			if err == nil {
				err = buildWorker(ctx, mod, c.workerBin)
			}
			workerDone <- err
		}()
	} else {
		workerDone <- nil
	}

	serverBin, sqlTool, cli, err := c.binaries(ctx)
	if err != nil {
		return c, err
	}
	if err := c.startPostgres(ctx); err != nil {
		return c, err
	}
	c.progressf("PostgreSQL %s on 127.0.0.1:%d, data %s", filepath.Base(filepath.Dir(c.pg.bin)), c.pg.port, c.pg.data)

	cfgRoot := filepath.Join(c.dir, "temporal")
	if err := writeDeployFiles(cfgRoot); err != nil {
		return c, fmt.Errorf("writing the server configuration: %w", err)
	}
	path, err := toolPath(filepath.Join(c.dir, "bin"), map[string]string{"temporal-sql-tool": sqlTool, "temporal": cli})
	if err != nil {
		return c, err
	}
	setupLog := filepath.Join(c.dir, "setup.log")
	if err := setupSchema(ctx, cfgRoot, path, c.pg.port, setupLog); err != nil {
		return c, err
	}
	c.progressf("schemas of temporal and temporal_visibility set up")

	if c.srv, err = newTemporalServer(serverBin, cfgRoot, filepath.Join(c.dir, "temporal.log"), c.pg.port, opts.ServerLogLevel); err != nil {
		return c, err
	}
	if err := c.srv.start(ctx); err != nil {
		return c, err
	}
	if err := c.checkServer(ctx); err != nil {
		return c, err
	}
	if err := createNamespace(ctx, cfgRoot, path, c.srv.address, setupLog); err != nil {
		return c, err
	}
	c.progressf("namespace %s with search attributes %s", Namespace, SearchAttributesEnv())
	if c.client, err = client.DialContext(ctx, client.Options{
		HostPort:  c.srv.address,
		Namespace: Namespace,
		Identity:  "sessionflow-cluster",
		Logger:    log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	}); err != nil {
		return c, fmt.Errorf("connecting to %s: %w", c.srv.address, err)
	}
	if err := c.checkInFlightUpdates(ctx); err != nil {
		return c, err
	}

	if err := <-workerDone; err != nil {
		return c, err
	}
	for i := range max(opts.Workers, 0) {
		w, err := c.startWorker(ctx, i, WorkerOptions{})
		if err != nil {
			return c, err
		}
		c.mu.Lock()
		c.workers = append(c.workers, w)
		c.mu.Unlock()
	}
	c.progressf("%d workers polling %s, store root %s; up in %v", len(c.workers), opts.TaskQueue, c.root, time.Since(started).Round(100*time.Millisecond))
	return c, nil
}

// checkServer checks that the server runs deploy's configuration: its
// history shards and its SQL visibility store.
func (c *Cluster) checkServer(ctx context.Context) error {
	cl, err := client.DialContext(ctx, client.Options{
		HostPort: c.srv.address, Namespace: "temporal-system",
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", c.srv.address, err)
	}
	defer cl.Close()
	info, err := cl.WorkflowService().GetClusterInfo(ctx, &workflowservice.GetClusterInfoRequest{})
	if err != nil {
		return fmt.Errorf("reading the cluster info: %w", err)
	}
	if info.GetHistoryShardCount() != HistoryShards {
		return fmt.Errorf("the server runs %d history shards, deploy's configuration %d", info.GetHistoryShardCount(), HistoryShards)
	}
	c.progressf("Temporal server %s at %s: %d history shards, persistence %s, visibility %s", info.GetServerVersion(), c.srv.address,
		info.GetHistoryShardCount(), info.GetPersistenceStore(), info.GetVisibilityStore())
	return nil
}

// binaries locates (building on first use) the server, the SQL tool and the
// Temporal CLI the namespace script calls.
func (c *Cluster) binaries(ctx context.Context) (server, sqlTool, cli string, err error) {
	if server, err = Locate(ctx, ServerTool, c.opts.Build); err != nil {
		return
	}
	if sqlTool, err = Locate(ctx, SQLTool, c.opts.Build); err != nil {
		return
	}
	cli, err = devserver.Locate(ctx, devserver.LocateOptions{
		CacheDir: c.opts.Build.CacheDir, Progress: c.opts.Build.Progress,
		Getenv: c.opts.Build.Getenv, WorkDir: c.opts.Build.WorkDir,
	})
	return
}

// startPostgres finds (or installs) PostgreSQL, creates the database
// cluster and starts it on a free port.
func (c *Cluster) startPostgres(ctx context.Context) error {
	getenv := c.opts.Build.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	bin, err := postgresBinDir(ctx, getenv, !c.opts.NoInstall, c.opts.Progress)
	if err != nil {
		return err
	}
	cred, err := unprivileged()
	if err != nil {
		return err
	}
	c.pgDir = filepath.Join(c.dir, "postgres")
	if cred != nil {
		// Root's directories need not be reachable by the database's user:
		// the database lives in a directory of its own under the system's
		// temporary directory.
		if c.pgDir, err = os.MkdirTemp("", "sessionflow-pg-"); err != nil {
			return err
		}
		if err := os.Chown(c.pgDir, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	} else if err := os.MkdirAll(c.pgDir, 0o700); err != nil {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	pg := &postgres{
		bin: bin, data: filepath.Join(c.pgDir, "data"), port: ports[0], cred: cred,
		logPath: filepath.Join(c.dir, "postgres.log"),
	}
	if err := initPostgres(ctx, bin, pg.data, cred); err != nil {
		return err
	}
	if err := pg.start(ctx); err != nil {
		return err
	}
	c.pg = pg
	return nil
}

// Address is the Temporal frontend's host:port.
func (c *Cluster) Address() string { return c.srv.address }

// Namespace is the namespace the workers serve.
func (c *Cluster) Namespace() string { return Namespace }

// TaskQueue is the workers' task queue.
func (c *Cluster) TaskQueue() string { return c.opts.TaskQueue }

// Root is the store root the workers share.
func (c *Cluster) Root() string { return c.root }

// Compression is the workers' store encoding.
func (c *Cluster) Compression() jsonl.Compression { return c.opts.Compression }

// Dir holds the cluster's files and logs.
func (c *Cluster) Dir() string { return c.dir }

// Client is a Temporal client of the cluster's namespace; it stays the
// cluster's (Stop closes it).
func (c *Cluster) Client() client.Client { return c.client }

// PostgresPort is PostgreSQL's TCP port on 127.0.0.1.
func (c *Cluster) PostgresPort() int { return c.pg.port }

// Workers returns the current worker of every slot (nil for a slot whose
// worker was killed and not started again).
func (c *Cluster) Workers() []*Worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Worker(nil), c.workers...)
}

// KillWorker kills worker slot i with SIGKILL and returns it; the slot stays
// empty until StartWorker.
func (c *Cluster) KillWorker(i int) *Worker {
	c.mu.Lock()
	w := c.workers[i]
	c.workers[i] = nil
	c.mu.Unlock()
	if w != nil {
		w.proc.kill()
	}
	return w
}

// StartWorker starts a worker in slot i (len(Workers()) adds a slot),
// stopping the one there first, and waits until it polls.
func (c *Cluster) StartWorker(ctx context.Context, i int, o WorkerOptions) (*Worker, error) {
	c.mu.Lock()
	if i > len(c.workers) {
		c.mu.Unlock()
		return nil, fmt.Errorf("cluster: no worker slot %d", i)
	}
	if i == len(c.workers) {
		c.workers = append(c.workers, nil)
	}
	old := c.workers[i]
	c.workers[i] = nil
	c.mu.Unlock()
	stopWorker(old, 10*time.Second)
	w, err := c.startWorker(ctx, i, o)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.workers[i] = w
	c.mu.Unlock()
	return w, nil
}

// StopWorker stops worker slot i gracefully (SIGTERM, SIGKILL after 10 s);
// the slot stays empty until StartWorker.
func (c *Cluster) StopWorker(i int) {
	c.mu.Lock()
	var w *Worker
	if i < len(c.workers) {
		w = c.workers[i]
		c.workers[i] = nil
	}
	c.mu.Unlock()
	stopWorker(w, 10*time.Second)
}

// KillServer kills the Temporal server with SIGKILL.
func (c *Cluster) KillServer() { c.srv.kill() }

// StartServer starts the Temporal server again, on the same ports and
// database, and waits until its frontend serves.
func (c *Cluster) StartServer(ctx context.Context) error { return c.srv.start(ctx) }

// CrashPostgres stops PostgreSQL without a checkpoint (immediate shutdown):
// connections drop and the next start recovers from the WAL.
func (c *Cluster) CrashPostgres() { c.pg.crash() }

// StartPostgres starts PostgreSQL again on the same port and data directory.
func (c *Cluster) StartPostgres(ctx context.Context) error { return c.pg.start(ctx) }

// Psql runs a query with psql against database db and returns its
// unaligned, tuples-only output.
func (c *Cluster) Psql(ctx context.Context, db, query string) (string, error) {
	psql := filepath.Join(c.pg.bin, "psql")
	cmd := exec.CommandContext(ctx, psql, "-h", "127.0.0.1", "-p", strconv.Itoa(c.pg.port), "-U", dbUser, "-d", db,
		"-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", query)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+dbPassword)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("psql %s: %w: %s", db, err, out)
	}
	return string(out), nil
}

// Stop stops the workers, the server and PostgreSQL, and removes a
// temporary directory unless Options.Keep.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		c.mu.Lock()
		workers := c.workers
		c.workers = nil
		c.mu.Unlock()
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() { defer wg.Done(); stopWorker(w, 10*time.Second) }()
		}
		wg.Wait()
		if c.client != nil {
			c.client.Close()
		}
		if c.srv != nil {
			if err := c.srv.stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping the Temporal server: %w", err))
			}
		}
		if c.pg != nil {
			if err := c.pg.stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping PostgreSQL: %w", err))
			}
		}
		if c.pgDir != "" && !isUnder(c.pgDir, c.dir) && !c.opts.Keep {
			_ = os.RemoveAll(c.pgDir)
		}
		if c.tempDir && !c.opts.Keep {
			_ = os.RemoveAll(c.dir)
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// isUnder reports whether path is dir or inside it.
func isUnder(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !filepath.IsAbs(rel) && (len(rel) < 3 || rel[:3] != "../")
}
