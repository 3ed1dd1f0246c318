package cluster

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/sessionflow/sessionflow/deploy"
	"github.com/sessionflow/sessionflow/internal/app/readiness"
)

// serverPorts are the environment variables of the server configuration's
// ports (deploy/temporal/config), the frontend's gRPC port first.
var serverPorts = []string{
	"FRONTEND_GRPC_PORT", "FRONTEND_HTTP_PORT", "FRONTEND_MEMBERSHIP_PORT",
	"MATCHING_GRPC_PORT", "MATCHING_MEMBERSHIP_PORT",
	"HISTORY_GRPC_PORT", "HISTORY_MEMBERSHIP_PORT",
	"WORKER_GRPC_PORT", "WORKER_MEMBERSHIP_PORT",
}

// temporalServer is the cluster's Temporal server process.
type temporalServer struct {
	bin     string
	root    string // holds deploy's config tree
	logPath string
	env     []string
	address string
	proc    *proc
}

// writeDeployFiles copies deploy.Files (the server configuration, dynamic
// config and setup scripts) under dir.
func writeDeployFiles(dir string) error {
	return fs.WalkDir(deploy.Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(path))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := deploy.Files.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}

// freePorts returns n distinct TCP ports of 127.0.0.1 that are free now,
// below 32768: the server stores its membership ports in a smallint column,
// and the kernel's ephemeral ports are above it.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("finding %d free ports below 32768: too many taken", n)
		}
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// newTemporalServer prepares the server's environment: the configuration
// of deploy under root, the database at pgPort, free ports for every
// service.
func newTemporalServer(bin, root, logPath string, pgPort int, logLevel string) (*temporalServer, error) {
	ports, err := freePorts(len(serverPorts))
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(),
		"DB=postgres12",
		"POSTGRES_SEEDS=127.0.0.1",
		"DB_PORT="+strconv.Itoa(pgPort),
		"POSTGRES_USER="+dbUser,
		"POSTGRES_PWD="+dbPassword,
		"DBNAME=temporal",
		"VISIBILITY_DBNAME=temporal_visibility",
		"BIND_ON_IP=127.0.0.1",
		"TEMPORAL_BROADCAST_ADDRESS=127.0.0.1",
		"DYNAMIC_CONFIG_FILE_PATH="+filepath.Join(root, filepath.FromSlash(deploy.DynamicConfigFile)),
		"LOG_LEVEL="+logLevel,
	)
	for i, k := range serverPorts {
		env = append(env, k+"="+strconv.Itoa(ports[i]))
	}
	return &temporalServer{
		bin:     bin,
		root:    root,
		logPath: logPath,
		env:     env,
		address: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
	}, nil
}

// start starts the server and waits until its frontend answers the health
// check.
func (s *temporalServer) start(ctx context.Context) error {
	cmd := exec.Command(s.bin,
		"--root", s.root, "--config", filepath.FromSlash(deploy.ServerConfigDir), "--env", deploy.ServerEnv,
		"--allow-no-auth", "start")
	cmd.Env = s.env
	cmd.Dir = s.root
	p, err := startProc("temporal-server", cmd, s.logPath, nil)
	if err != nil {
		return err
	}
	s.proc = p
	if err := s.awaitHealthy(ctx); err != nil {
		p.kill()
		return err
	}
	return nil
}

// awaitHealthy waits until the frontend answers the health check and the
// system namespace is served (the server has loaded its namespaces from the
// database).
func (s *temporalServer) awaitHealthy(ctx context.Context) error {
	return readiness.Wait(ctx, readiness.Options{
		What: "the Temporal server", Timeout: 3 * time.Minute, Interval: 250 * time.Millisecond,
		Exited: s.proc.Exited(), ExitErr: s.proc.Err, Log: s.proc.log,
	}, func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := client.DialContext(pctx, client.Options{
			HostPort:  s.address,
			Namespace: "temporal-system",
			Logger:    log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WorkflowService().DescribeNamespace(pctx, &workflowservice.DescribeNamespaceRequest{Namespace: "temporal-system"})
		return err
	})
}

// kill ends the server with SIGKILL.
func (s *temporalServer) kill() {
	if s.proc != nil {
		s.proc.kill()
	}
}

// stop shuts the server down (SIGTERM), killing it after a grace period.
func (s *temporalServer) stop() error {
	if s.proc == nil {
		return nil
	}
	return s.proc.stop(syscall.SIGTERM, 30*time.Second)
}
