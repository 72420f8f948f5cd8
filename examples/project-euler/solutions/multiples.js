let input = "";
process.stdin.on("data", (c) => (input += c));
process.stdin.on("end", () => {
  const { a, b, n } = JSON.parse(input);
  let total = 0;
  for (let k = 1; k < n; k++) if (k % a === 0 || k % b === 0) total += k;
  console.log(total);
});
