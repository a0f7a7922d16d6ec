// Validates rendered Kubernetes manifests offline: every object against the schema of its
// apiVersion and kind (npm's kubernetes-models, and its Prometheus Operator models for
// ServiceMonitor and PodMonitor). An object of a kind neither knows is an error too.
//
// usage: node validate.mjs RENDERED.yaml...
// Prints one line per object ("ok Kind/name" or "invalid Kind/name: why") and exits 1 if
// any is invalid or unknown.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

// The module that holds the model of apiVersion/kind.
function modelModule(apiVersion, kind) {
  if (apiVersion.startsWith("monitoring.coreos.com/")) {
    return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
  }
  return `kubernetes-models/${apiVersion}/${kind}`;
}

async function validateObject(object) {
  const { apiVersion, kind } = object;
  const name = `${kind}/${object.metadata?.name ?? "(no name)"}`;
  if (typeof apiVersion !== "string" || typeof kind !== "string") {
    return `invalid ${name}: no apiVersion or kind`;
  }
  let Model;
  try {
    Model = (await import(modelModule(apiVersion, kind)))[kind];
  } catch {
    return `invalid ${name}: no schema for ${apiVersion} ${kind}`;
  }
  if (!object.metadata?.name) return `invalid ${name}: metadata.name is missing`;
  try {
    new Model(object).validate();
  } catch (error) {
    return `invalid ${name}: ${error.message}`;
  }
  return `ok ${name}`;
}

let failures = 0;
for (const file of process.argv.slice(2)) {
  for (const document of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (document.errors.length > 0) {
      console.log(`invalid ${file}: ${document.errors[0].message}`);
      failures++;
      continue;
    }
    const object = document.toJS();
    if (object === null) continue;  // an empty document
    const line = await validateObject(object);
    console.log(line);
    if (!line.startsWith("ok ")) failures++;
  }
}
process.exit(failures > 0 ? 1 : 0);
