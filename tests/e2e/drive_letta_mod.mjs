// Test helper for tests/e2e/test_letta_mod.py (not shipped).
//
// Letta Code with mods (>= 0.30) does not install here, so this plays its
// part: it loads a generated mod with jiti (the TypeScript loader Pi uses),
// activates it against a stand-in `letta` object, runs one command with a
// stand-in conversation whose getHistory() returns a JSON file, disposes the
// mod, and prints what happened as one JSON line.
//
//   node drive_letta_mod.mjs JITI_DIR MOD.ts HISTORY.json COMMAND ARGS CWD
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const [jitiDir, modPath, historyPath, command, args, cwd] = process.argv.slice(2);
const require = createRequire(`${jitiDir}/`);
const { createJiti } = require("jiti");
const activate = await createJiti(import.meta.url).import(modPath, { default: true });

const registered = new Map();
const letta = {
	capabilities: { commands: true },
	commands: {
		register(spec) {
			if (registered.has(spec.id)) throw new Error(`duplicate command ${spec.id}`);
			registered.set(spec.id, spec);
			return () => registered.delete(spec.id);
		},
	},
};
const dispose = activate(letta);
const ids = [...registered.keys()];
const calls = [];
const ctx = {
	cwd,
	args,
	agent: { id: "agent-e2e", name: "e2e" },
	conversation: {
		id: "conv-e2e",
		getHistory: async (options) => {
			calls.push(options);
			return JSON.parse(readFileSync(historyPath, "utf8"));
		},
	},
};
const result = await registered.get(command).run(ctx);
dispose();
process.stdout.write(`${JSON.stringify({ ids, result, historyCalls: calls, left: registered.size })}\n`);
