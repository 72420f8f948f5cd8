// The lcm of lo..hi, divided before multiplying to stay below 2^53.
let input = "";
process.stdin.on("data", (c) => (input += c));
process.stdin.on("end", () => {
  const { lo, hi } = JSON.parse(input);
  const gcd = (x, y) => (y === 0 ? x : gcd(y, x % y));
  let value = 1;
  for (let k = lo; k <= hi; k++) value = (value / gcd(value, k)) * k;
  console.log(String(value));
});
