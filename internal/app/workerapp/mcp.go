package workerapp

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"slices"

	"github.com/sessionflow/sessionflow/tool/mcptool"
)

// EnvMCPConfig names the MCP servers' configuration file when --mcp-config
// is not given.
const EnvMCPConfig = "SESSIONFLOW_MCP_CONFIG"

// mcpFlags are the worker's flags of MCP servers.
type mcpFlags struct {
	path string
}

// addMCPFlags defines the MCP flags on fs.
func addMCPFlags(fs *flag.FlagSet) *mcpFlags {
	f := &mcpFlags{}
	fs.StringVar(&f.path, "mcp-config", "", `JSON file of MCP servers whose tools the agents get, as {"mcpServers":{"NAME":{"command":...,"args":[...],"env":{...}} or {"url":...,"headers":{...}}}} (env `+EnvMCPConfig+")")
	return f
}

// config resolves the flag against the environment and checks the file,
// so a bad configuration stops the worker before it starts.
func (f *mcpFlags) config(pick func(flagName, envName, flagValue string) (string, string)) (string, error) {
	path, src := pick("mcp-config", EnvMCPConfig, f.path)
	if path == "" {
		return "", nil
	}
	if _, err := mcptool.LoadConfig(path); err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	return path, nil
}

// StartMCP starts the MCP servers configured in cfg.MCPConfig and returns
// cfg with their tools added to cfg.Tools, and a function that stops the
// servers (call it after the worker stopped). With no MCPConfig it
// returns cfg unchanged. Its error names the file.
func StartMCP(ctx context.Context, cfg AgentConfig, logger *slog.Logger) (AgentConfig, func(), error) {
	if cfg.MCPConfig == "" {
		return cfg, func() {}, nil
	}
	if logger == nil {
		logger = slog.Default()
	}
	servers, err := mcptool.LoadConfig(cfg.MCPConfig)
	if err != nil {
		return cfg, nil, fmt.Errorf("--mcp-config: %w", err)
	}
	b, err := mcptool.Start(ctx, servers, mcptool.Options{Logger: logger.With("component", "mcp")})
	if err != nil {
		return cfg, nil, fmt.Errorf("--mcp-config %s: %w", cfg.MCPConfig, err)
	}
	cfg.Tools = append(slices.Clone(cfg.Tools), b.Tools()...)
	stop := func() {
		if err := b.Close(); err != nil {
			logger.Warn("stopping the MCP servers", "error", err)
		}
	}
	return cfg, stop, nil
}
