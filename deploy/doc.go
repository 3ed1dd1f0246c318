// Package deploy holds the container deployment of sessionflow: a Docker Compose stack
// (docker-compose.yml) that runs PostgreSQL, the Temporal server with its schema and namespace
// setup jobs, the Temporal Web UI and the sessionflow worker built from Dockerfile, with the
// session store on a named volume. Files embeds the configuration the stack
// mounts (the Temporal server configuration under temporal/config, its dynamic config and the
// setup scripts), which the local cluster launcher (internal/app/cluster) runs with as well. Its
// tests load the Compose file with the Compose specification's own loader and check the stack's
// wiring, and its agreement with the launcher, without a Docker engine.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring. Its code imports no sessionflow package; its tests may
// import the packages they check against (internal/app/cluster,
// internal/app/devserver, workflows).
package deploy
