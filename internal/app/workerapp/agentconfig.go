package workerapp

import (
	"fmt"

	"go.temporal.io/sdk/worker"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/tool"
)

// ScriptedProvider is the provider name under which --provider-script
// offers the scripted provider.
const ScriptedProvider = "scripted"

// AgentConfig configures the agent activities a worker registers.
type AgentConfig struct {
	// ProviderScript is the path of a scripted provider's JSON script; when
	// set, the provider is offered as "scripted".
	ProviderScript string
	// SystemPrompt is the system prompt of every model call.
	SystemPrompt string
	// EnableRunCommand offers the run_command tool.
	EnableRunCommand bool
	// SubagentMaxDepth configures the subagent tool (--subagent-max-depth;
	// docs/API.md "Subagents"): nil offers it with
	// tool.DefaultSubagentMaxDepth, a negative value does not offer it, 0
	// offers it refusing every delegation.
	SubagentMaxDepth *int
	// RuntimeContext stores the harness's runtime-context snapshot before
	// model requests (agent.Activities.RuntimeContext; --runtime-context).
	RuntimeContext bool
	// Anthropic configures the Anthropic provider (--anthropic).
	Anthropic AnthropicConfig
	// OpenAI configures the OpenAI-compatible providers (--openai,
	// --openai-compatible).
	OpenAI OpenAIConfig
	// Providers are more providers an embedding application offers, by
	// name.
	Providers provider.Set
	// Tools are more tools an embedding application offers, beside the
	// built-in ones.
	Tools []tool.Tool
	// MCPConfig is the path of the MCP servers' configuration file
	// (--mcp-config); StartMCP adds their tools to Tools.
	MCPConfig string
	// Limits bound each model call (--model-idle-timeout,
	// --model-call-timeout, --max-model-output); zero fields take the
	// defaults.
	Limits agent.ModelLimits
	// DenyPaths are paths the built-in tools never reach
	// (tool.BuiltinOptions.Deny; --tool-deny), beside those the worker
	// denies itself: the provider script and the MCP configuration here,
	// the store root and the TLS files in Run, the dev server's state in
	// `worker --dev` (docs/API.md "Tools", DECISIONS.md D69).
	DenyPaths []string
	// Compaction tunes compaction (--context-window, --compact-threshold,
	// --compact-retain, --summary-max-tokens); zero fields take the
	// defaults, and routes without a window know none.
	Compaction agent.CompactionSettings
}

// AgentActivities builds the agent activities of cfg over rt: the
// providers (cfg.Providers, the scripted one from ProviderScript, and those
// of cfg.Anthropic and cfg.OpenAI), the built-in tools (run_command when
// enabled; kept out of cfg.DenyPaths, the provider script and the MCP
// configuration) and cfg.Tools, and the system prompt.
func AgentActivities(rt *activities.Runtime, cfg AgentConfig) (*agent.Activities, error) {
	providers := provider.Set{}
	for name, p := range cfg.Providers {
		providers[name] = p
	}
	if cfg.ProviderScript != "" {
		if _, ok := providers[ScriptedProvider]; ok {
			return nil, fmt.Errorf("provider %q is given twice: by --provider-script and by the embedding application", ScriptedProvider)
		}
		p, err := scripted.Load(cfg.ProviderScript)
		if err != nil {
			return nil, fmt.Errorf("--provider-script: %w", err)
		}
		providers[ScriptedProvider] = p
	}
	if err := addAnthropic(providers, cfg.Anthropic); err != nil {
		return nil, err
	}
	if err := addOpenAI(providers, cfg.OpenAI); err != nil {
		return nil, err
	}
	deny := append([]string{cfg.ProviderScript, cfg.MCPConfig}, cfg.DenyPaths...)
	tools := append(tool.Builtins(tool.BuiltinOptions{RunCommand: cfg.EnableRunCommand, Deny: deny}), cfg.Tools...)
	depth := tool.DefaultSubagentMaxDepth
	if cfg.SubagentMaxDepth != nil {
		depth = *cfg.SubagentMaxDepth
	}
	if depth >= 0 {
		tools = append(tools, tool.Subagent(tool.SubagentOptions{MaxDepth: depth}))
	}
	reg, err := tool.NewRegistry(tools...)
	if err != nil {
		return nil, fmt.Errorf("the agent's tools: %w", err)
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	compaction := cfg.Compaction
	if compaction.Windows == nil {
		compaction.Windows = tableWindow
	}
	return &agent.Activities{Runtime: rt, Providers: providers, Tools: reg, System: cfg.SystemPrompt, Limits: cfg.Limits, Compaction: compaction,
		RuntimeContext: cfg.RuntimeContext}, nil
}

// RegisterAgent registers the agent activities (CallModel, RunTool,
// EndTurn, CloseCalls, Compact) on r.
func RegisterAgent(r worker.Registry, acts *agent.Activities) {
	r.RegisterActivity(acts)
}
