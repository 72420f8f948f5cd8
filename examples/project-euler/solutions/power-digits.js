// BigInt: base ** exponent has hundreds of digits.
let input = "";
process.stdin.on("data", (c) => (input += c));
process.stdin.on("end", () => {
  const { base, exponent } = JSON.parse(input);
  let value = 1n;
  for (let i = 0; i < exponent; i++) value *= BigInt(base);
  let sum = 0;
  for (const digit of value.toString()) sum += digit.charCodeAt(0) - 48;
  console.log(sum);
});
