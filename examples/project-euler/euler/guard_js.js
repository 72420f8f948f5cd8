// Loaded with `node --require` under Node's permission model (which already
// refuses child processes, workers, native addons and writes outside the
// work dir): refuse outgoing connections and name resolution as well.
"use strict";
const net = require("net");
const dns = require("dns");
function deny(what) {
  return function () {
    throw new Error("sandbox: " + what + " is not allowed");
  };
}
net.Socket.prototype.connect = deny("net connect");
net.connect = net.createConnection = deny("net connect");
net.Server.prototype.listen = deny("net listen");
for (const name of Object.keys(dns)) {
  if (typeof dns[name] === "function" && name !== "Resolver") dns[name] = deny("dns");
}
for (const name of Object.keys(dns.promises)) {
  if (typeof dns.promises[name] === "function") dns.promises[name] = deny("dns");
}
dns.Resolver = dns.promises.Resolver = deny("dns");
