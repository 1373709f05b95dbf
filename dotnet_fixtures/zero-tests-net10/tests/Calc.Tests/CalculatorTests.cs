namespace Calc.Tests;

public class CalculatorTests
{
    private readonly Calculator _calculator = new();

    public int Sum(int a, int b) => _calculator.Add(a, b);
}
