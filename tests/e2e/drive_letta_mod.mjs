// Test helper for tests/e2e/test_letta_mod.py (not shipped).
//
// Letta Code with mods (>= 0.30) does not install here, so this plays its
// part: it loads generated mods with jiti (the TypeScript loader Pi uses; Letta
// Code transpiles with TypeScript, and both only strip types here) and
// activates each against a stand-in `letta` that follows Letta Code's mod API
// as its sources define it (src/mods/mod-engine.ts LettaModApi, types.ts,
// capabilities.ts, conversation-handle.ts; backend/dev/pi-provider-mod-*.ts):
//
//   capabilities      DEFAULT_MOD_CAPABILITIES (all on), or as the plan says
//   commands.register id a lowercase slug, a description, run(); duplicates
//                     throw; returns a disposer
//   providers.register(name, config): the name and static models validated
//                     as registerPiProvider does (a static id may not contain
//                     "/"), listModels a function; returns a disposer
//   events.on         the ten supported names only; an event whose capability
//                     is off is not registered; returns a disposer
//   ui.openPanel      needs render(); returns { close, update }; setStatus,
//                     clearStatus and setStatuslineRenderer were removed from
//                     the API: a call records a migration diagnostic
//   diagnostics.report, signal (aborted when the driver unloads the mods),
//   and the unregister / off / closePanel counterparts
//
// Command ctx: ModContext fields (cwd, agent, model, ...), rawInput, command,
// args, argv, and a conversation handle { id, getHistory, updateLlmConfig,
// fork, sendMessageStream }. Event ctx: the same with a signal. getHistory
// answers from a JSON file; updateLlmConfig changes the model later contexts
// see. The steps of the plan run in order; every process a mod starts is
// recorded with its options and awaited before the next step. Prints one
// JSON line.
//
//   node drive_letta_mod.mjs JITI_DIR PLAN.json CWD
//
// PLAN: {"mods": [FILE...], "history": FILE, "model": {...}, "capabilities":
// {...}, "steps": [...]} ("historyError": MESSAGE makes getHistory throw;
// "refuseModels": [HANDLE...] makes updateLlmConfig throw for those) with steps
//   {"command": ID, "args": TEXT}      a slash command (its result is kept)
//   {"event": NAME, "data": {...}}     an event to every handler of NAME
//   {"listModels": {CONNECTION}}       the registered provider's listModels
//   {"run": [ARGS], "limit": S}        the machine mod's runMachine, directly
//                                      ("reloadAfter": S aborts letta.signal then)
//   {"exec": [ARGV]}                   a process of the test's own
//   {"model": {...}}                   the user's own /model
import childProcess from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire, syncBuiltinESMExports } from "node:module";

const [jitiDir, planPath, cwd] = process.argv.slice(2);
const require = createRequire(`${jitiDir}/`);
const { createJiti } = require("jiti");
const plan = JSON.parse(readFileSync(planPath, "utf8"));

// Record and await every process the mods start.
const spawns = [];
const spawnOptions = [];
const running = new Set();
const realSpawn = childProcess.spawn;
childProcess.spawn = (command, args, options) => {
	const child = realSpawn(command, args, options);
	spawns.push([command, ...args]);
	const env = options?.env ?? {};
	spawnOptions.push({
		stdin: options?.stdio?.[0],
		detached: options?.detached === true,
		env: Object.fromEntries(
			["PAGER", "GIT_PAGER", "EDITOR", "VISUAL", "GIT_EDITOR", "GIT_TERMINAL_PROMPT"].map((k) => [k, env[k]]),
		),
	});
	const done = new Promise((resolve) => child.on("close", resolve));
	running.add(done);
	done.then(() => running.delete(done));
	return child;
};
syncBuiltinESMExports();

async function settle() {
	for (let quiet = 0; quiet < 5; ) {
		if (running.size > 0) {
			quiet = 0;
			await Promise.all([...running]);
		} else quiet += 1;
		await new Promise((resolve) => setImmediate(resolve));
	}
}

// -- the stand-in letta (src/mods/capabilities.ts, mod-engine.ts) -------------------

const DEFAULT_CAPABILITIES = {
	tools: true,
	commands: true,
	events: { lifecycle: true, tools: true, turns: true, compact: true, llm: true },
	permissions: true,
	providers: true,
	ui: { panels: true },
};
const capabilities = {
	...DEFAULT_CAPABILITIES,
	...(plan.capabilities ?? {}),
	events: { ...DEFAULT_CAPABILITIES.events, ...(plan.capabilities?.events ?? {}) },
	ui: { ...DEFAULT_CAPABILITIES.ui, ...(plan.capabilities?.ui ?? {}) },
};
const EVENT_CAPABILITY = {
	conversation_open: "lifecycle",
	conversation_close: "lifecycle",
	tool_start: "tools",
	tool_end: "tools",
	turn_start: "turns",
	turn_end: "turns",
	compact_start: "compact",
	compact_end: "compact",
	llm_start: "llm",
	llm_end: "llm",
};

const commands = new Map();
const providers = new Map();
const handlers = new Map();
const panels = new Map();
const diagnostics = [];
const abort = new AbortController();

function validateProvider(name, config) {
	// pi-provider-mod-validation: the name, listModels, static models
	if (!/^[a-z0-9][a-z0-9._-]*$/.test(name)) throw new Error(`bad provider name ${name}`);
	if (config.listModels !== undefined && typeof config.listModels !== "function") {
		throw new Error(`Provider ${name}.listModels must be a function`);
	}
	if (config.connect !== undefined && typeof config.connect !== "boolean" && typeof config.connect !== "object") {
		throw new Error(`Provider ${name}.connect must be boolean or object`);
	}
	for (const model of config.models ?? []) {
		if (model.id.includes("/")) throw new Error(`Provider ${name}, model ${model.id}: id must be unprefixed and cannot contain "/"`);
		if (!model.api && !config.api) throw new Error(`Provider ${name}, model ${model.id}: api is required`);
	}
}

function removed(api) {
	diagnostics.push({ message: `${api} is no longer available. Use letta.ui.openPanel({ id, order, render }) instead`, severity: "warning" });
}

const letta = {
	capabilities,
	signal: abort.signal,
	commands: {
		register(spec) {
			if (!capabilities.commands) return () => undefined;
			if (!/^[a-z0-9][a-z0-9-]*$/.test(spec.id)) throw new Error(`bad command id ${spec.id}`);
			if (!spec.description?.trim()) throw new Error(`Mod command '${spec.id}' must include a description`);
			if (typeof spec.run !== "function") throw new Error(`Mod command '${spec.id}' must include run()`);
			if (commands.has(spec.id)) throw new Error(`Mod command '${spec.id}' is already registered`);
			commands.set(spec.id, spec);
			return () => commands.delete(spec.id);
		},
		unregister: (id) => commands.delete(id),
	},
	providers: {
		register(name, config) {
			if (!capabilities.providers) return () => undefined;
			validateProvider(name, config);
			providers.set(name, config);
			return () => providers.delete(name);
		},
		unregister: (name) => providers.delete(name),
	},
	events: {
		on(name, handler) {
			if (!(name in EVENT_CAPABILITY)) throw new Error(`Unsupported mod event '${name}'`);
			if (!capabilities.events[EVENT_CAPABILITY[name]]) return () => undefined;
			handlers.set(name, [...(handlers.get(name) ?? []), handler]);
			return () => letta.events.off(name, handler);
		},
		off(name, handler) {
			handlers.set(name, (handlers.get(name) ?? []).filter((h) => h !== handler));
		},
	},
	ui: {
		openPanel(panel) {
			if (!capabilities.ui.panels) return { close() {}, update() {} };
			if (typeof panel.render !== "function") throw new Error("letta.ui.openPanel requires a render(ctx) function.");
			panels.set(panel.id, { order: panel.order ?? 100, render: panel.render, updates: 0 });
			return {
				close: () => panels.delete(panel.id),
				update: () => {
					const open = panels.get(panel.id);
					if (open) open.updates += 1;
				},
			};
		},
		closePanel: (id) => panels.delete(id),
		// removed from the API: a call only records a migration diagnostic
		setStatus: () => removed("letta.ui.setStatus"),
		clearStatus: () => removed("letta.ui.clearStatus"),
		setStatuslineRenderer: () => removed("letta.ui.setStatuslineRenderer"),
	},
	diagnostics: {
		report(diagnostic) {
			diagnostics.push({ message: diagnostic.message, severity: diagnostic.severity ?? "error" });
		},
	},
};

// -- contexts (types.ts ModContext, ModCommandContext, ModEventContext) -------------

let model = plan.model ?? { id: "anthropic/claude-e2e", displayName: "Claude e2e", provider: "anthropic", reasoningEffort: null };
const conversations = [];
function conversation(id) {
	return {
		id,
		getHistory: async (options) => {
			conversations.push({ getHistory: options });
			if (plan.historyError) throw new Error(plan.historyError);
			return JSON.parse(readFileSync(plan.history, "utf8"));
		},
		updateLlmConfig: async (options) => {
			conversations.push({ updateLlmConfig: options });
			if (plan.refuseModels?.includes(options.model)) throw new Error(`Model ${options.model} not found`);
			const [provider] = options.model.split("/");
			model = { id: options.model, displayName: options.model, provider, reasoningEffort: null };
		},
		fork: async () => {
			throw new Error("fork is not part of this stand-in");
		},
		sendMessageStream: async () => {
			throw new Error("sendMessageStream is not part of this stand-in");
		},
		new: async () => {
			throw new Error("new is not part of this stand-in");
		},
		updateTitle: async () => {
			throw new Error("updateTitle is not part of this stand-in");
		},
	};
}
function context(id) {
	return {
		app: { version: "stand-in" },
		workspace: { cwd, currentDir: cwd, projectDir: cwd },
		cwd,
		sessionId: id,
		lastRunId: null,
		agent: { id: "agent-e2e", name: "e2e" },
		model: { ...model },
		toolset: null,
		systemPromptId: null,
		permissionMode: null,
		networkPhase: null,
		terminalWidth: 80,
		contextWindow: { size: 0, totalInputTokens: 0, totalOutputTokens: 0, usedPercentage: null, remainingPercentage: null, currentUsage: null },
		cost: { totalDurationMs: 0, totalApiDurationMs: 0, totalCostUsd: null, totalLinesAdded: null, totalLinesRemoved: null },
		reflection: { mode: null, stepCount: 0 },
		memfs: { enabled: false, memoryDir: null },
		backgroundAgents: [],
	};
}
const CONVERSATION = plan.conversation ?? "conv-e2e";

// -- load and play ---------------------------------------------------------------------

const modules = [];
const disposers = [];
for (const file of plan.mods) {
	const module = await createJiti(import.meta.url, { moduleCache: false }).import(file);
	modules.push(module);
	const dispose = await module.default(letta);
	if (typeof dispose === "function") disposers.push(dispose);
}
const registered = {
	commands: [...commands.keys()],
	providers: Object.fromEntries(
		[...providers.entries()].map(([name, config]) => [name, { ...JSON.parse(JSON.stringify(config)), listModels: typeof config.listModels }]),
	),
	events: [...handlers.keys()],
	panels: [...panels.entries()].map(([id, p]) => ({ id, order: p.order })),
	diagnostics: [...diagnostics],
};

function panelText() {
	return [...panels.entries()].map(([id, p]) => {
		const body = p.render({ ...context(CONVERSATION), width: 80, row: (l, r) => `${l} ${r}`, columns: (parts) => parts.join(" "), chalk: {} });
		return { id, lines: Array.isArray(body) ? body : [body] };
	});
}

const results = [];
for (const step of plan.steps) {
	const before = { spawns: spawns.length, conversations: conversations.length, diagnostics: diagnostics.length };
	const started = Date.now();
	let result;
	if (step.command) {
		const args = step.args ?? "";
		const ctx = {
			...context(CONVERSATION),
			rawInput: `/${step.command} ${args}`.trim(),
			command: step.command,
			args,
			argv: args.split(/\s+/).filter((s) => s),
			conversation: conversation(CONVERSATION),
		};
		result = await commands.get(step.command).run(ctx);
	} else if (step.event) {
		result = [];
		for (const handler of handlers.get(step.event) ?? []) {
			const ctx = { ...context(CONVERSATION), conversation: conversation(step.data?.conversationId ?? CONVERSATION), signal: abort.signal };
			result.push((await handler({ ...step.data }, ctx)) ?? null);
		}
	} else if (step.listModels) {
		const [name, config] = [...providers.entries()][0];
		try {
			result = { name, models: await config.listModels({ id: name, providerName: name, ...step.listModels }, abort.signal) };
		} catch (err) {
			result = { name, error: err.message };
		}
	} else if (step.run) {
		// "reloadAfter": S aborts the activation's signal meanwhile, as /reload does
		if (step.reloadAfter) setTimeout(() => abort.abort("reload"), step.reloadAfter * 1000);
		result = await modules[0].runMachine(step.run, cwd, step.limit ? { limitS: step.limit } : {});
	} else if (step.exec) {
		childProcess.execFileSync(step.exec[0], step.exec.slice(1), { cwd, stdio: ["ignore", "ignore", "inherit"] });
	} else if (step.model) {
		model = step.model;
	}
	await settle();
	results.push({
		result: result ?? null,
		seconds: (Date.now() - started) / 1000,
		spawns: spawns.slice(before.spawns),
		conversation: conversations.slice(before.conversations),
		diagnostics: diagnostics.slice(before.diagnostics),
		panels: panelText(),
	});
}
abort.abort("unloaded");
for (const dispose of disposers.reverse()) dispose();
process.stdout.write(
	`${JSON.stringify({
		registered,
		steps: results,
		spawnOptions,
		left: { commands: commands.size, providers: providers.size, events: [...handlers.values()].flat().length, panels: panels.size },
		model,
	})}\n`,
);
