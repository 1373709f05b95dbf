using Xunit;

namespace Calc.Tests;

public class CalculatorTests
{
    [Fact]
    public void Add_ReturnsSum()
    {
        var calculator = new Calculator();

        Assert.Equal(5, calculator.Add(2, 3));
    }

    [Fact]
    public void Multiply_ReturnsProduct()
    {
        var calculator = new Calculator();

        Assert.Equal(6, calculator.Multiply(2, 3));
    }
}
