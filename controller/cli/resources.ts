// `stackflux input-resources` / `output-resources`: what the controller reads and writes, from the
// one declaration in controller/api/resources.ts (which also generates the install RBAC).
import {
  INPUT_RESOURCES,
  LEADER_ELECTION_RESOURCES,
  OUTPUT_RESOURCES,
  RENDER_SEED_RESOURCES,
  type ResourceDeclaration,
} from '../api/resources.ts';
import { canonicalYaml } from '../offline/yaml.ts';
import type { Command } from './command.ts';

function list(resources: readonly ResourceDeclaration[]): string {
  return canonicalYaml(
    resources.map((r) => ({ group: r.group, version: r.version, resource: r.resource, verbs: [...r.verbs] })),
  );
}

export const inputResourcesCommand: Command = {
  name: 'input-resources',
  summary: 'List the resources the controller reads (YAML: group, version, resource, verbs)',
  flags: {},
  run: async (_flags, _positionals, io) => {
    io.stdout(list(INPUT_RESOURCES));
    return 0;
  },
};

export const outputResourcesCommand: Command = {
  name: 'output-resources',
  summary: 'List the resources the controller writes (YAML: group, version, resource, verbs)',
  flags: {},
  run: async (_flags, _positionals, io) => {
    io.stdout(list([...OUTPUT_RESOURCES, ...LEADER_ELECTION_RESOURCES, ...RENDER_SEED_RESOURCES]));
    return 0;
  },
};
