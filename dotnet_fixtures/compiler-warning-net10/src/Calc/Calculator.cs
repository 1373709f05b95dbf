namespace Calc;

public class Calculator
{
    public int Add(int a, int b) => a + b;

    public int Multiply(int a, int b) => a * b;

    public int ParseOrZero(string text)
    {
        try
        {
            return int.Parse(text);
        }
        catch (FormatException e)
        {
            return 0;
        }
    }
}
