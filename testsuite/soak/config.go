package soak

import (
	"fmt"
	"io"
	"time"

	"github.com/sessionflow/sessionflow/jsonl"
)

// Defaults of Config.
const (
	DefaultKills           = 200
	DefaultSessions        = 8
	DefaultMinInterval     = 300 * time.Millisecond
	DefaultMaxInterval     = 1500 * time.Millisecond
	DefaultBatch           = 8
	DefaultAppendTimeout   = 20 * time.Second
	DefaultBatchDeadline   = 3 * time.Minute
	DefaultTaskQueue       = "soak"
	DefaultRecoveryTimeout = time.Minute
	DefaultLifecycles      = 1
	DefaultClusterWorkers  = 2
)

// Config configures Run. Zero values take the defaults.
type Config struct {
	// Kills is the number of SIGKILLs of the worker; default DefaultKills.
	Kills int
	// Sessions is the number of sessions appended to concurrently; default
	// DefaultSessions.
	Sessions int
	// Lifecycles is the number of concurrent lifecycle loops, each taking
	// new sessions through create, appends, dispose, resume, an append and
	// dispose while the worker is killed; default DefaultLifecycles,
	// negative for none.
	Lifecycles int
	// Seed seeds the random kill intervals and batch sizes.
	Seed int64
	// MinInterval and MaxInterval bound the random time a worker runs,
	// once it polls, before it is killed.
	MinInterval, MaxInterval time.Duration
	// Batch is the largest number of events of one append; every batch has
	// a random size in 1..Batch. Default DefaultBatch.
	Batch int
	// AppendTimeout bounds one Append attempt; a timed-out attempt is
	// retried with the same batch. Default DefaultAppendTimeout.
	AppendTimeout time.Duration
	// BatchDeadline bounds the retries of one batch; a batch still not
	// acknowledged then is an invariant failure. Default DefaultBatchDeadline.
	BatchDeadline time.Duration
	// HeartbeatTimeout is the heartbeat timeout of the sessions' store
	// activities (workflows.Options.HeartbeatTimeoutMs): how long an
	// activity attempt lost with a killed worker takes to be retried.
	// Zero or negative leaves the workflows' default
	// (workflows.DefaultStoreHeartbeatTimeout).
	HeartbeatTimeout time.Duration
	// Compression is the store encoding of the worker; default
	// jsonl.CompressionNone.
	Compression jsonl.Compression
	// TaskQueue is the task queue of the worker; default DefaultTaskQueue.
	TaskQueue string
	// Dir holds the server state, the store root, the worker binary and
	// the logs; empty means a new temporary directory, removed at the end
	// unless Keep is set.
	Dir string
	// Keep keeps a temporary Dir after the run.
	Keep bool
	// WorkerBinary is a built worker; empty means `go build ./worker` in
	// ModuleDir.
	WorkerBinary string
	// ModuleDir is the sessionflow module root; empty means the module of
	// the working directory (`go list -m`).
	ModuleDir string
	// Eager starts the random interval before the next kill as soon as the
	// restarted worker polls. By default it starts once every session has
	// had a batch acknowledged since the kill (or after RecoveryTimeout),
	// so that every kill hits a worker that is busy appending rather than
	// one still waiting for the workflows to come back from the dead
	// worker's sticky queue.
	Eager bool
	// Standby runs a second worker process, never killed, beside the one
	// the soak kills: the killed worker's sessions can go on through it
	// while the killed one restarts, as in a fleet of workers, so the
	// recovery times do not include the restart.
	Standby bool
	// RecoveryTimeout bounds the wait for progress after a restart; default
	// DefaultRecoveryTimeout.
	RecoveryTimeout time.Duration
	// WorkflowTaskTimeout is the client's client.Options.WorkflowTaskTimeout
	// for the sessions it starts: how long a workflow task the killed worker
	// had started is waited for. 0 takes the client's default
	// (client.DefaultWorkflowTaskTimeout), negative the server's (10 s).
	WorkflowTaskTimeout time.Duration
	// StickyTimeout is the worker's --sticky-timeout: how long the next
	// workflow task of a session waits on the killed worker's sticky queue.
	// 0 takes the worker's default (workerapp.DefaultStickyTimeout).
	StickyTimeout time.Duration
	// ContinueAsNewEvents, when positive, is the history length at which
	// the server suggests continue-as-new (limit.historyCount.
	// suggestContinueAsNew), so that kills also land around the sessions'
	// continues-as-new; 0 keeps the server's default (4096).
	ContinueAsNewEvents int
	// SessionContinueAsNewEvents, when positive, is the sessions'
	// options.continueAsNewEvents: the history length at which they
	// continue as new on their own. 0 keeps the sessions' default
	// (workflows.DefaultContinueAsNewEvents).
	SessionContinueAsNewEvents int
	// Turns is the number of sessions whose agent runs turns, one after
	// another, while the worker is killed: each turn writes, reads and lists
	// files in the session's cwd and calls a tool the worker lacks, through
	// the worker's scripted provider (run_command stays off). 0 runs none.
	Turns int
	// Cluster runs the soak on a local cluster (internal/app/cluster:
	// PostgreSQL, the Temporal server with deploy's configuration, Workers
	// worker processes on one task queue and one store root) instead of the
	// dev server; each kill ends one of the workers, chosen at random, while
	// the others keep running, and starts it again.
	Cluster bool
	// Workers is the number of worker processes of a cluster soak; default
	// DefaultClusterWorkers.
	Workers int
	// KillBudget, when positive, ends the kills once this long has passed
	// since the first, even before Kills; the final checks run as after the
	// last kill. Summary.Kills says how many were made.
	KillBudget time.Duration
	// Measure makes a cluster soak measure create-to-live, sessions/s and
	// appends/s (ClusterFigures) before its kills.
	Measure bool
	// Progress receives progress lines; nil discards them.
	Progress io.Writer
}

func (c *Config) defaults() {
	if c.Kills <= 0 {
		c.Kills = DefaultKills
	}
	if c.Sessions <= 0 {
		c.Sessions = DefaultSessions
	}
	if c.Lifecycles == 0 {
		c.Lifecycles = DefaultLifecycles
	}
	if c.MinInterval <= 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.MaxInterval < c.MinInterval {
		c.MaxInterval = c.MinInterval
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	if c.AppendTimeout <= 0 {
		c.AppendTimeout = DefaultAppendTimeout
	}
	if c.BatchDeadline <= 0 {
		c.BatchDeadline = DefaultBatchDeadline
	}
	if c.Compression == "" {
		c.Compression = jsonl.CompressionNone
	}
	if c.TaskQueue == "" {
		c.TaskQueue = DefaultTaskQueue
	}
	if c.RecoveryTimeout <= 0 {
		c.RecoveryTimeout = DefaultRecoveryTimeout
	}
	if c.Workers <= 0 {
		c.Workers = DefaultClusterWorkers
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// Summary is the outcome of a soak.
type Summary struct {
	// Kills is the number of SIGKILLs sent to the worker.
	Kills int
	// Sessions is the number of sessions checked: the Config.Sessions
	// appended to throughout and the Lifecycles sessions.
	Sessions int
	// Lifecycles is the number of sessions the lifecycle loops took from
	// create to their final dispose.
	Lifecycles int
	// Acked is the number of events the client saw acknowledged.
	Acked int64
	// Lost is the number of acknowledged events missing from the store or
	// stored with other content, over all checks.
	Lost int
	// Duplicates is the number of seqs stored more than once, over all
	// checks.
	Duplicates int
	// Unresumable is the number of sessions that could not be resumed and
	// disposed after the final dispose.
	Unresumable int
	// Failures describes every invariant failure (including the ones
	// counted above), in the order found.
	Failures []string
	// Turns are the figures of the turn sessions' logs at the end (zero
	// without Config.Turns).
	Turns TurnFigures
	// AgentRetries counts the agent activities of the turn sessions that
	// needed another attempt.
	AgentRetries AgentRetries
	// Failover are the recovery times after the kills and the workflow
	// task timeouts counted in the histories at the end.
	Failover Failover
	// Batches is the number of appends the client saw acknowledged.
	Batches int64
	// KillPhase is the time from the first kill's wait to the last kill.
	KillPhase time.Duration
	// Cluster holds the measurements of a cluster soak with Config.Measure,
	// nil otherwise.
	Cluster *ClusterFigures
	// Elapsed is the duration of the run.
	Elapsed time.Duration
}

// String returns the summary line.
func (s Summary) String() string {
	line := fmt.Sprintf("soak: kills=%d sessions=%d acked=%d lost=%d duplicates=%d unresumable=%d",
		s.Kills, s.Sessions, s.Acked, s.Lost, s.Duplicates, s.Unresumable)
	if s.KillPhase > 0 {
		line += fmt.Sprintf(" batches=%d kill-phase=%v appends/s-during-kills=%.1f", s.Batches, s.KillPhase.Round(time.Second), float64(s.Batches)/s.KillPhase.Seconds())
	}
	if s.Turns != (TurnFigures{}) {
		line += fmt.Sprintf(" turns=%d model-calls=%d tool-calls=%d outcome-unknown=%d retried-model=%d retried-tool=%d",
			s.Turns.Turns, s.Turns.ModelCalls, s.Turns.ToolCalls, s.Turns.OutcomeUnknown, s.AgentRetries.Model, s.AgentRetries.Tool)
	}
	return line
}

// OK reports whether the soak found nothing wrong.
func (s Summary) OK() bool {
	return s.Lost == 0 && s.Duplicates == 0 && s.Unresumable == 0 && len(s.Failures) == 0
}
