// Loaded with `node --require` under Node's permission model (which already
// refuses child processes, workers, native addons, process.binding and
// writes outside the work dir): refuse sockets and name resolution as well.
// A second layer only: the sandbox around Node is what holds.
"use strict";
const net = require("net");
const dgram = require("dgram");
const dns = require("dns");
function deny(what) {
  return function () {
    throw new Error("sandbox: " + what + " is not allowed");
  };
}
net.Socket.prototype.connect = deny("net connect");
net.connect = net.createConnection = deny("net connect");
net.Server.prototype.listen = deny("net listen");
dgram.createSocket = deny("dgram");
dgram.Socket.prototype.send = dgram.Socket.prototype.bind = deny("dgram");
for (const name of Object.keys(dns)) {
  if (typeof dns[name] === "function" && name !== "Resolver") dns[name] = deny("dns");
}
for (const name of Object.keys(dns.promises)) {
  if (typeof dns.promises[name] === "function") dns.promises[name] = deny("dns");
}
dns.Resolver = dns.promises.Resolver = deny("dns");
