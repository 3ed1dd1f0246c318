package workerapp

// AgentConfig configures the agent activities a worker registers.
type AgentConfig struct {
	// ProviderScript is the path of a scripted provider's JSON script; when
	// set, the provider is offered as "scripted".
	ProviderScript string
	// SystemPrompt is the system prompt of every model call.
	SystemPrompt string
	// EnableRunCommand offers the run_command tool.
	EnableRunCommand bool
}
