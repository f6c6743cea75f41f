// Sparkplug B payloads through Eclipse Tahu's JavaScript implementation
// (npm `sparkplug-payload`): an independent reader of what the engine
// publishes, and a writer of what a host sends it.
//
//   node sparkplug_codec.js decode   stdin: one hex payload a line
//                                    stdout: one JSON payload a line
//   node sparkplug_codec.js encode   stdin: one JSON payload a line
//                                    stdout: one hex payload a line
//
// 64-bit numbers come out as JSON numbers (exact below 2^53).
"use strict";

const sparkplug = require("sparkplug-payload").get("spBv1.0");

function plain(key, value) {
    if (value && typeof value === "object" && "low" in value && "high" in value && "unsigned" in value) {
        return Number(value.toString());
    }
    if (value instanceof Uint8Array) {
        return Buffer.from(value).toString("hex");
    }
    return value;
}

const mode = process.argv[2];
const lines = require("fs").readFileSync(0, "utf8").split("\n").filter((l) => l.length > 0);
const out = lines.map((line) => {
    if (mode === "decode") {
        return JSON.stringify(sparkplug.decodePayload(Buffer.from(line, "hex")), plain);
    }
    if (mode === "encode") {
        return Buffer.from(sparkplug.encodePayload(JSON.parse(line))).toString("hex");
    }
    throw new Error(`unknown mode ${mode}: decode or encode`);
});
process.stdout.write(out.map((l) => l + "\n").join(""));
