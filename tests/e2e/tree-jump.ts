/**
 * Test helper for tests/e2e/test_pi_extension.py (not shipped).
 *
 * /jump does what a /tree jump does in the TUI: it moves the session's leaf
 * back to the first finished answer on the branch, in memory only (pi writes
 * nothing until the next entry). A /good that follows in the same process
 * must tag the turn on screen, not the last turn in the file.
 */
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
	pi.registerCommand("jump", {
		description: "test helper: /tree to the first finished answer",
		handler: async (_args, ctx) => {
			await ctx.waitForIdle();
			const target = ctx.sessionManager
				.getBranch()
				.find((e: any) => e.type === "message" && e.message.role === "assistant" && e.message.stopReason === "stop");
			if (!target) throw new Error("/jump: no finished answer");
			const result = await ctx.navigateTree(target.id, { summarize: false });
			if (result.cancelled) throw new Error("/jump: navigateTree cancelled");
		},
	});
}
