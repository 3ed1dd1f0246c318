package deploy

import "embed"

// Files holds the configuration files the compose stack mounts into its containers and the local
// cluster launcher (internal/app/cluster) runs with: the Temporal server configuration, its dynamic
// config and the two setup scripts, at the paths of the constants below.
//
//go:embed temporal/config/docker.yaml dynamicconfig/sessionflow.yaml scripts/setup-schema.sh scripts/create-namespace.sh
var Files embed.FS

// Paths in Files, relative to this directory.
const (
	// ServerConfigDir is the Temporal server's configuration directory: the server loads
	// <ServerConfigDir>/<ServerEnv>.yaml.
	ServerConfigDir = "temporal/config"
	// DynamicConfigFile is the server's dynamic configuration.
	DynamicConfigFile = "dynamicconfig/sessionflow.yaml"
	// SetupSchemaScript creates and upgrades the persistence and visibility databases.
	SetupSchemaScript = "scripts/setup-schema.sh"
	// CreateNamespaceScript registers the namespace and the search attributes.
	CreateNamespaceScript = "scripts/create-namespace.sh"
)

// ServerEnv is the server's environment name (`temporal-server --env`), which names the file it
// loads in ServerConfigDir; the server image starts the server with it.
const ServerEnv = "docker"
