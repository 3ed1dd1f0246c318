package workerapp

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/worker"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/httpapi"
	"github.com/sessionflow/sessionflow/internal/app/telemetry"
	"github.com/sessionflow/sessionflow/internal/app/temporalconn"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/tool"
)

// Defaults of Config.
const (
	DefaultAddress        = temporalconn.DefaultAddress
	DefaultNamespace      = temporalconn.DefaultNamespace
	DefaultTaskQueue      = "sessionflow"
	DefaultStoreRoot      = "./.sessionflow/store"
	DefaultCompression    = jsonl.CompressionZstd
	DefaultAppendWindow   = time.Duration(0) // group commit
	DefaultMetricsAddress = ":9090"
	DefaultStopTimeout    = 30 * time.Second
	// DefaultStickyTimeout is the sticky schedule-to-start timeout
	// (docs/DECISIONS.md D48); the SDK's own default is 5 s.
	DefaultStickyTimeout = time.Second
)

// Environment variables read by ParseArgs besides Temporal's own
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*,
// TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE, TEMPORAL_GRPC_META_*), which are
// read by go.temporal.io/sdk/contrib/envconfig.
const (
	EnvTaskQueue                  = "SESSIONFLOW_TASK_QUEUE"
	EnvStoreRoot                  = "SESSIONFLOW_ROOT"
	EnvCompression                = "SESSIONFLOW_COMPRESSION"
	EnvFormat                     = "SESSIONFLOW_FORMAT"
	EnvAppendWindow               = "SESSIONFLOW_APPEND_WINDOW"
	EnvMaxConcurrentActivities    = "SESSIONFLOW_MAX_CONCURRENT_ACTIVITIES"
	EnvMaxConcurrentWorkflowTasks = "SESSIONFLOW_MAX_CONCURRENT_WORKFLOW_TASKS"
	EnvMetricsAddress             = "SESSIONFLOW_METRICS_ADDRESS"
	EnvStopTimeout                = "SESSIONFLOW_STOP_TIMEOUT"
	EnvStickyTimeout              = "SESSIONFLOW_STICKY_TIMEOUT"
	EnvIdentity                   = "SESSIONFLOW_WORKER_IDENTITY"
	EnvProviderScript             = "SESSIONFLOW_PROVIDER_SCRIPT"
	EnvSystemPrompt               = "SESSIONFLOW_SYSTEM_PROMPT"
	EnvEnableRunCommand           = "SESSIONFLOW_ENABLE_RUN_COMMAND"
	EnvTraceContent               = "SESSIONFLOW_TRACE_CONTENT"
	EnvToolDeny                   = "SESSIONFLOW_TOOL_DENY"
	EnvRuntimeContext             = "SESSIONFLOW_RUNTIME_CONTEXT"
	EnvSubagentMaxDepth           = "SESSIONFLOW_SUBAGENT_MAX_DEPTH"
	EnvHTTP                       = "SESSIONFLOW_HTTP"
	EnvHTTPToken                  = httpapi.EnvToken
	EnvTemporalUI                 = "SESSIONFLOW_TEMPORAL_UI"
)

// Config configures Run.
type Config struct {
	// Connection is the Temporal client profile: address, namespace, API key,
	// TLS and gRPC metadata, in the shape of the temporal CLI's profiles.
	Connection envconfig.ClientConfigProfile
	// TaskQueue is the task queue the worker polls.
	TaskQueue string
	// StoreRoot is the session store root.
	StoreRoot string
	// Compression is the store root's encoding.
	Compression jsonl.Compression
	// Format is the log format new sessions are written in: jsonl.FormatV3
	// (the default) or jsonl.FormatV0 for a root shared with the published
	// DeepSeek Harness.
	Format jsonl.Format
	// StoreFS is the filesystem the session store works through; nil means
	// the operating system's. Tests pass a fault-injecting one.
	StoreFS jsonl.FS
	// AppendWindow is the append batching window of the sessions this
	// worker runs when their request leaves it unset.
	AppendWindow time.Duration
	// MaxConcurrentActivities bounds concurrent activity executions; 0 takes
	// the SDK default.
	MaxConcurrentActivities int
	// MaxConcurrentWorkflowTasks bounds concurrent workflow task executions;
	// 0 takes the SDK default.
	MaxConcurrentWorkflowTasks int
	// MaxStoreDescriptors bounds the descriptors the session store keeps
	// open between mutations (jsonl.Options.MaxDescriptors); 0 is no limit.
	MaxStoreDescriptors int
	// WorkflowCacheSize is the size of the SDK's workflow cache (process
	// wide, fixed by the first worker of the process); 0 takes the SDK
	// default.
	WorkflowCacheSize int
	// MetricsAddress is where the Prometheus /metrics endpoint listens;
	// empty turns it off.
	MetricsAddress string
	// HTTPAddress is where the session API over HTTP listens (package
	// httpapi); empty turns it off. A bare port listens on 127.0.0.1.
	HTTPAddress string
	// HTTPToken is the bearer token of the HTTP API; required when
	// HTTPAddress is not loopback.
	HTTPToken string
	// TemporalUI is the address of the Temporal Web UI the web view links
	// sessions to (--temporal-ui; `worker --dev` sets its dev server's).
	TemporalUI string
	// StopTimeout is how long a graceful shutdown waits for running
	// activities.
	StopTimeout time.Duration
	// StickyTimeout is the worker's sticky schedule-to-start timeout: how
	// long a workflow task waits on this worker's own queue before any
	// worker may take it, which is how long the sessions of a worker that
	// crashed wait for their next task. 0 takes DefaultStickyTimeout; raise
	// it when the worker is so busy that a task may wait longer on its
	// queue (docs/DECISIONS.md D48).
	StickyTimeout time.Duration
	// Identity is the worker identity; empty takes the SDK default
	// (pid@host).
	Identity string
	// Agent configures the agent activities (model and tool calls of the
	// sessions' turns).
	Agent AgentConfig
	// TraceContent records prompts, responses, tool arguments and results
	// on the model and tool call spans (off by default).
	TraceContent bool
	// Permissions are the permission defaults of the sessions whose
	// agentOptions and log set none (--sandbox-mode, --approval-policy,
	// --preset); zero fields leave the built-in defaults. A session's
	// workflow takes them from its handle activity's result, so every
	// worker of a task queue should use the same (docs/API.md "Approvals").
	Permissions activities.PermissionDefaults
	// Tracing, when set, is the tracing the worker uses (Run does not shut
	// it down); nil builds it from the OTEL_EXPORTER_OTLP_* environment
	// (telemetry.New) and flushes it when Run returns. A dialed client gets
	// its client interceptors; with Client set, Run puts the tracing
	// interceptor on the worker instead, so Client must not carry it.
	Tracing *telemetry.Tracing

	// Client, when set, is used instead of dialing Connection; Run does not
	// close it, and SDK metrics are those of that client.
	Client client.Client
	// Register, when set, registers more workflows and activities (hooks of
	// an embedding application) after sessionflow's own.
	Register func(worker.Registry)
	// OnStarted, when set, is called once the worker polls.
	OnStarted func(Started)
}

// Started describes a running worker; Run passes it to Config.OnStarted.
type Started struct {
	// Address and Namespace are the Temporal frontend and namespace.
	Address   string
	Namespace string
	// TaskQueue is the polled task queue.
	TaskQueue string
	// MetricsAddr is the bound address of the metrics endpoint, empty when
	// metrics are off.
	MetricsAddr string
	// HTTPAddr is the bound address of the HTTP API, empty when it is off.
	HTTPAddr string
	// Client is the worker's client.
	Client client.Client
	// Store is the worker's session store.
	Store *jsonl.Store
}

// DefaultConfig returns the configuration with every default applied.
func DefaultConfig() Config {
	return Config{
		Connection:          envconfig.ClientConfigProfile{Address: DefaultAddress, Namespace: DefaultNamespace},
		TaskQueue:           DefaultTaskQueue,
		StoreRoot:           DefaultStoreRoot,
		Compression:         DefaultCompression,
		Format:              jsonl.FormatV3,
		AppendWindow:        DefaultAppendWindow,
		MetricsAddress:      DefaultMetricsAddress,
		StopTimeout:         DefaultStopTimeout,
		StickyTimeout:       DefaultStickyTimeout,
		MaxStoreDescriptors: DefaultMaxStoreDescriptors,
		Agent: AgentConfig{Limits: agent.DefaultModelLimits(), Compaction: agent.CompactionSettings{
			Threshold: agent.DefaultCompactThreshold, Retain: agent.DefaultCompactRetain, SummaryMaxTokens: agent.DefaultSummaryMaxTokens}},
	}
}

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	switch {
	case c.Client == nil && c.Connection.Address == "":
		return errors.New("the Temporal address is empty")
	case c.Client == nil && c.Connection.Namespace == "":
		return errors.New("the Temporal namespace is empty")
	case c.TaskQueue == "":
		return errors.New("the task queue is empty")
	case c.StoreRoot == "":
		return errors.New("the store root is empty")
	}
	for _, n := range []struct {
		name     string
		value    any
		negative bool
	}{
		{"the append window", c.AppendWindow, c.AppendWindow < 0},
		{"the maximum of concurrent activities", c.MaxConcurrentActivities, c.MaxConcurrentActivities < 0},
		{"the maximum of concurrent workflow tasks", c.MaxConcurrentWorkflowTasks, c.MaxConcurrentWorkflowTasks < 0},
		{"the sticky timeout", c.StickyTimeout, c.StickyTimeout < 0},
		{"the stop timeout", c.StopTimeout, c.StopTimeout < 0},
		{"the store descriptor limit", c.MaxStoreDescriptors, c.MaxStoreDescriptors < 0},
		{"the workflow cache size", c.WorkflowCacheSize, c.WorkflowCacheSize < 0},
	} {
		if n.negative {
			return fmt.Errorf("%s %v is negative", n.name, n.value)
		}
	}
	if _, err := jsonl.ParseCompression(string(c.Compression)); err != nil {
		return err
	}
	if c.MetricsAddress != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddress); err != nil {
			return fmt.Errorf("the metrics address %q: %w", c.MetricsAddress, err)
		}
	}
	if c.HTTPAddress != "" {
		_, loopback, err := httpapi.ListenAddress(c.HTTPAddress)
		if err != nil {
			return err
		}
		if !loopback && c.HTTPToken == "" {
			return fmt.Errorf("--http %s: %w (give --http-token or %s)", c.HTTPAddress, httpapi.ErrTokenRequired, EnvHTTPToken)
		}
	}
	return nil
}

// Flags are the worker's command-line flags, bound to a flag.FlagSet by
// AddFlags. After the set is parsed, Config resolves them against the
// environment.
type Flags struct {
	fs   *flag.FlagSet
	conn *temporalconn.Flags

	taskQueue, storeRoot, compression, metricsAddress  string
	httpAddress, httpToken, temporalUI                 string
	format                                             string
	appendWindow, stopTimeout, identity, stickyTimeout string
	maxConcurrentActivities, maxConcurrentWorkflowTask int
	providerScript, systemPrompt, toolDeny             string
	enableRunCommand, traceContent, runtimeContext     bool
	subagentMaxDepth                                   int
	anthropic                                          *anthropicFlags
	openai                                             *openAIFlags
	mcp                                                *mcpFlags
	fleet                                              *fleetFlags
	model                                              *modelFlags
	compact                                            *compactFlags
	permissions                                        *permissionFlags
}

// AddFlags defines the worker's flags on fs.
func AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	f.conn = temporalconn.AddFlags(fs)
	fs.StringVar(&f.taskQueue, "task-queue", DefaultTaskQueue, "task queue to poll (env "+EnvTaskQueue+")")
	fs.StringVar(&f.storeRoot, "store-root", DefaultStoreRoot, "session store root (env "+EnvStoreRoot+")")
	fs.StringVar(&f.compression, "compression", string(DefaultCompression), "store encoding: zstd or none (env "+EnvCompression+")")
	fs.StringVar(&f.format, "format", string(jsonl.FormatV3), "log format new sessions are written in: v3, or v0 for a root shared with the published DeepSeek Harness (env "+EnvFormat+")")
	fs.StringVar(&f.appendWindow, "append-window", DefaultAppendWindow.String(), "append batching window of sessions that leave it unset; 0 = group commit: store an append at once unless a store is in flight (env "+EnvAppendWindow+"; every worker of a task queue must use the same value)")
	fs.IntVar(&f.maxConcurrentActivities, "max-concurrent-activities", 0, "maximum concurrent activity executions, 0 = SDK default (env "+EnvMaxConcurrentActivities+")")
	fs.IntVar(&f.maxConcurrentWorkflowTask, "max-concurrent-workflow-tasks", 0, "maximum concurrent workflow task executions, 0 = SDK default (env "+EnvMaxConcurrentWorkflowTasks+")")
	fs.StringVar(&f.metricsAddress, "metrics-address", DefaultMetricsAddress, "Prometheus /metrics listen address, empty = off (env "+EnvMetricsAddress+")")
	fs.StringVar(&f.httpAddress, "http", "", "serve the session API over HTTP on this address, e.g. 8080 (127.0.0.1:8080) or 0.0.0.0:8080 (needs --http-token); empty = off (env "+EnvHTTP+")")
	fs.StringVar(&f.temporalUI, "temporal-ui", "", "address of the Temporal Web UI the web view links each session's workflow to, e.g. http://localhost:8233; worker --dev sets its dev server's (env "+EnvTemporalUI+")")
	fs.StringVar(&f.httpToken, "http-token", "", "bearer token of the HTTP API, required on a non-loopback address (env "+EnvHTTPToken+")")
	fs.StringVar(&f.stopTimeout, "stop-timeout", DefaultStopTimeout.String(), "how long shutdown waits for running activities (env "+EnvStopTimeout+")")
	fs.StringVar(&f.stickyTimeout, "sticky-timeout", DefaultStickyTimeout.String(), "how long a workflow task waits on this worker's sticky queue before any worker may take it, 0 = "+DefaultStickyTimeout.String()+" (env "+EnvStickyTimeout+")")
	fs.StringVar(&f.identity, "identity", "", "worker identity, default pid@host (env "+EnvIdentity+")")
	fs.StringVar(&f.providerScript, "provider-script", "", "JSON script of the scripted model provider, offered as provider \"scripted\" (env "+EnvProviderScript+")")
	fs.StringVar(&f.systemPrompt, "system-prompt", "", "system prompt of every model call (env "+EnvSystemPrompt+")")
	fs.BoolVar(&f.enableRunCommand, "enable-run-command", false, "offer the run_command tool (runs sh -c in the session's cwd, confined by the session's sandbox mode) (env "+EnvEnableRunCommand+")")
	fs.IntVar(&f.subagentMaxDepth, "subagent-max-depth", tool.DefaultSubagentMaxDepth, "deepest child session the subagent tool starts (a child at that depth may not delegate again); 0 = the tool refuses every delegation, -1 = no subagent tool (env "+EnvSubagentMaxDepth+")")
	fs.BoolVar(&f.runtimeContext, "runtime-context", false, "store the harness's runtime context (the session's file policy and approval policy) as a user/message before a model request when the log does not hold it, as the harness does (env "+EnvRuntimeContext+")")
	fs.StringVar(&f.toolDeny, "tool-deny", "", "comma-separated paths the file tools never reach and run_command never runs in, beside the store root, the dev server's state and the worker's own files (env "+EnvToolDeny+")")
	f.anthropic = addAnthropicFlags(fs)
	f.openai = addOpenAIFlags(fs)
	f.mcp = addMCPFlags(fs)
	f.fleet = addFleetFlags(fs)
	f.model = addModelFlags(fs)
	f.compact = addCompactFlags(fs)
	f.permissions = addPermissionFlags(fs)
	fs.BoolVar(&f.traceContent, "trace-content", false, "record prompts, responses, tool arguments and results in trace spans (env "+EnvTraceContent+")")
	return f
}

// NewFlagSet returns a flag set named name, reporting errors instead of
// exiting, with the worker's flags defined on it.
func NewFlagSet(name string) (*flag.FlagSet, *Flags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs, AddFlags(fs)
}

// ParseArgs parses args (without the program name) and resolves them
// against environ (KEY=VALUE entries, as os.Environ returns).
func ParseArgs(args, environ []string) (Config, error) {
	fs, f := NewFlagSet("worker")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return f.Config(environ)
}

// Config resolves the parsed flags against environ (KEY=VALUE entries).
// Precedence, highest first: a flag given on the command line, the
// environment, the Temporal client config file profile, the default.
func (f *Flags) Config(environ []string) (Config, error) {
	env := temporalconn.NewEnv(environ)
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	pick := func(flagName, envName string, flagValue string) (string, string) {
		if set[flagName] {
			return flagValue, "--" + flagName
		}
		if v, ok := env.LookupEnv(envName); ok && v != "" {
			return v, envName
		}
		return flagValue, "--" + flagName
	}

	cfg := DefaultConfig()
	conn, err := f.conn.Profile(env)
	if err != nil {
		return Config{}, err
	}
	cfg.Connection = conn

	cfg.TaskQueue, _ = pick("task-queue", EnvTaskQueue, f.taskQueue)
	cfg.StoreRoot, _ = pick("store-root", EnvStoreRoot, f.storeRoot)
	cfg.Identity, _ = pick("identity", EnvIdentity, f.identity)
	cfg.HTTPAddress, _ = pick("http", EnvHTTP, f.httpAddress)
	cfg.HTTPToken, _ = pick("http-token", EnvHTTPToken, f.httpToken)
	cfg.TemporalUI, _ = pick("temporal-ui", EnvTemporalUI, f.temporalUI)
	compression, src := pick("compression", EnvCompression, f.compression)
	if cfg.Compression, err = jsonl.ParseCompression(compression); err != nil {
		return Config{}, fmt.Errorf("%s: %w", src, err)
	}
	format, src := pick("format", EnvFormat, f.format)
	if cfg.Format, err = jsonl.ParseFormat(format); err != nil {
		return Config{}, fmt.Errorf("%s: %w", src, err)
	}
	if cfg.AppendWindow, err = pickDuration(pick("append-window", EnvAppendWindow, f.appendWindow)); err != nil {
		return Config{}, err
	}
	if cfg.StopTimeout, err = pickDuration(pick("stop-timeout", EnvStopTimeout, f.stopTimeout)); err != nil {
		return Config{}, err
	}
	if cfg.StickyTimeout, err = pickDuration(pick("sticky-timeout", EnvStickyTimeout, f.stickyTimeout)); err != nil {
		return Config{}, err
	}
	if cfg.MaxConcurrentActivities, err = pickCount(pick("max-concurrent-activities", EnvMaxConcurrentActivities, strconv.Itoa(f.maxConcurrentActivities))); err != nil {
		return Config{}, err
	}
	if cfg.MaxConcurrentWorkflowTasks, err = pickCount(pick("max-concurrent-workflow-tasks", EnvMaxConcurrentWorkflowTasks, strconv.Itoa(f.maxConcurrentWorkflowTask))); err != nil {
		return Config{}, err
	}
	cfg.Agent.ProviderScript, _ = pick("provider-script", EnvProviderScript, f.providerScript)
	cfg.Agent.SystemPrompt, _ = pick("system-prompt", EnvSystemPrompt, f.systemPrompt)
	if cfg.Agent.EnableRunCommand, err = pickBool(pick("enable-run-command", EnvEnableRunCommand, strconv.FormatBool(f.enableRunCommand))); err != nil {
		return Config{}, err
	}
	if v, src := pick("subagent-max-depth", EnvSubagentMaxDepth, strconv.Itoa(f.subagentMaxDepth)); v != "" && v != strconv.Itoa(tool.DefaultSubagentMaxDepth) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %q is not an integer", src, v)
		}
		cfg.Agent.SubagentMaxDepth = &n
	}
	if cfg.Agent.RuntimeContext, err = pickBool(pick("runtime-context", EnvRuntimeContext, strconv.FormatBool(f.runtimeContext))); err != nil {
		return Config{}, err
	}
	if deny, _ := pick("tool-deny", EnvToolDeny, f.toolDeny); deny != "" {
		for _, p := range strings.Split(deny, ",") {
			if p = strings.TrimSpace(p); p != "" {
				cfg.Agent.DenyPaths = append(cfg.Agent.DenyPaths, p)
			}
		}
	}
	if cfg.Agent.Anthropic, err = f.anthropic.config(env, pick); err != nil {
		return Config{}, err
	}
	if cfg.Agent.OpenAI, err = f.openai.config(env, pick); err != nil {
		return Config{}, err
	}
	if cfg.Agent.MCPConfig, err = f.mcp.config(pick); err != nil {
		return Config{}, err
	}
	if err := f.fleet.config(&cfg, pick); err != nil {
		return Config{}, err
	}
	if cfg.Agent.Limits, err = f.model.config(pick); err != nil {
		return Config{}, err
	}
	if cfg.Agent.Compaction, err = f.compact.config(pick); err != nil {
		return Config{}, err
	}
	if cfg.TraceContent, err = pickBool(pick("trace-content", EnvTraceContent, strconv.FormatBool(f.traceContent))); err != nil {
		return Config{}, err
	}
	if cfg.Permissions, err = f.permissions.config(pick); err != nil {
		return Config{}, err
	}
	// An empty metrics address is meaningful (off), so a set but empty
	// variable counts here.
	cfg.MetricsAddress = f.metricsAddress
	if v, ok := env.LookupEnv(EnvMetricsAddress); ok && !set["metrics-address"] {
		cfg.MetricsAddress = v
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func pickDuration(v, src string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", src, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s: %s is negative", src, v)
	}
	return d, nil
}

func pickBool(v, src string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: %q is not a boolean", src, v)
	}
	return b, nil
}

func pickCount(v, src string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not an integer", src, v)
	}
	if n < 0 {
		return 0, fmt.Errorf("%s: %d is negative", src, n)
	}
	return n, nil
}
